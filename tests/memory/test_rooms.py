"""``rotifer.memory`` is built in rooms, and imports point one way: down.

From the bottom: the vocabulary (``model``, ``errors``, ``clock``, ...: plain
modules at the top of the package, and the audit log's action names), then
``storage/``, ``audit/``, ``engine/``, ``views/``, ``store``, and on top the
package's public face and ``transfer/``.  Every module of each room is
imported (so none is dead or broken on its own), and each one's imports --
those under ``TYPE_CHECKING`` too: a type is a dependency as well -- are read
from its source: none may name a module of a room above its own.  A test that
must fail when that is broken is below: a module with an upward import is
caught.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import rotifer.memory

PACKAGE = "rotifer.memory"
HOME = Path(rotifer.memory.__file__).parent

#: The rooms, bottom first: a module belongs to the first prefix it has (a
#: module's name relative to the package; "" is the package itself).
ROOMS: list[tuple[str, tuple[str, ...]]] = [
    ("vocabulary", ("errors", "clock", "keys", "lazy", "model", "filters", "policy", "quota", "paging",
                    "context", "signals", "private", "audit.actions")),
    ("storage", ("storage",)),
    ("audit", ("audit",)),
    ("engine", ("engine",)),
    ("views", ("views",)),
    ("store", ("store",)),
    ("on top", ("transfer", "")),
]


def room_of(name: str) -> int:
    """The level of a module given by its name relative to the package."""
    for level, (_, prefixes) in enumerate(ROOMS):
        for prefix in prefixes:
            if name == prefix or (prefix and name.startswith(prefix + ".")):
                return level
    raise AssertionError(f"rotifer.memory.{name} is in no room: add it to ROOMS")


def modules() -> list[tuple[str, Path]]:
    """Every module of the package: (name relative to the package, its file)."""
    found = []
    for path in sorted(HOME.rglob("*.py")):
        parts = list(path.relative_to(HOME).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append((".".join(parts), path))
    return found


def imported(name: str, path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """The modules of the package ``source`` (by default the file's text)
    imports: (line, name relative to the package).  ``from X import y`` counts
    ``X.y`` when that is a module, else ``X``."""
    tree = ast.parse(path.read_text() if source is None else source)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = [part for part in package.split(".") if part]
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                target = node.module[len(PACKAGE) + 1:]
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                if (HOME / sub.replace(".", "/")).is_dir() or \
                        (HOME / (sub.replace(".", "/") + ".py")).is_file():
                    out.append((node.lineno, sub))
                else:
                    out.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    out.append((node.lineno, alias.name[len(PACKAGE) + 1:]))
    return out


def upward(name: str, path: Path, source: str | None = None) -> list[str]:
    """The imports of a module that name a room above its own."""
    own = room_of(name)
    return sorted({f"{path.relative_to(HOME)}:{line} imports rotifer.memory.{target} "
                   f"({ROOMS[room_of(target)][0]}, above {ROOMS[own][0]})"
                   for line, target in imported(name, path, source) if room_of(target) > own})


@pytest.mark.parametrize("room", [name for name, _ in ROOMS])
def test_each_room_imports_on_its_own(room: str) -> None:
    """Each module of the room imports (a fresh interpreter is not needed: the
    point is that it is a real module with no broken import)."""
    level = [name for name, _ in ROOMS].index(room)
    names = [name for name, _ in modules() if room_of(name) == level]
    assert names, f"the room {room} holds no module"
    for name in names:
        importlib.import_module(f"{PACKAGE}.{name}" if name else PACKAGE)


def test_no_module_imports_a_room_above_its_own() -> None:
    problems = [problem for name, path in modules() for problem in upward(name, path)]
    assert problems == []


def test_the_check_catches_an_upward_import() -> None:
    """The check bites: a storage module that imported the store, or a view
    the store, is reported (on a copy of the source, nothing is written)."""
    for name in ("storage.backend", "views.gene_memory", "errors"):
        path = HOME / (name.replace(".", "/") + ".py")
        source = path.read_text() + "\nfrom rotifer.memory.store import MemoryStore\n"
        assert upward(name, path) == []
        assert any("rotifer.memory.store" in problem for problem in upward(name, path, source))
    relative = HOME / "storage" / "backend.py"
    source = relative.read_text() + "\nfrom ..views import gene_memory\n"
    assert any("views.gene_memory" in problem
               for problem in upward("storage.backend", relative, source))


def test_every_module_is_in_a_room() -> None:
    for name, _ in modules():
        room_of(name)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> the modules it imports)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(graph.get(name, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target):], target])
            elif target in graph and target not in state:
                visit(target, path)
        path.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    return found


def test_no_import_circle_even_within_a_room() -> None:
    """Not even under ``TYPE_CHECKING``: the store and its views, a view and
    its lean paths were such circles once."""
    graph = {name: {target for _, target in imported(name, path)} for name, path in modules()}
    assert cycles(graph) == []
    graph["engine.core"].add("store")  # the store imports the engine: now a circle
    assert [sorted(circle) for circle in cycles(graph)] == [["engine.core", "store", "store"]]


def bodies(source: str) -> list[str]:
    """The members of ``Transaction`` and ``Backend`` that have a body."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name in ("Transaction", "Backend"):
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and [
                        stmt for stmt in member.body
                        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))]:
                    found.append(f"{node.name}.{member.name}")
    return found


def test_the_backend_interface_only_declares() -> None:
    """``Transaction`` and ``Backend`` say what a backend must do and nothing
    more: no member has a body a backend would inherit by subclassing them
    (each backend writes its own, so reading one backend is reading all it does)."""
    source = (HOME / "storage" / "backend.py").read_text()
    assert bodies(source) == []
    with_body = source.replace("    def close(self) -> None: ...",
                               "    def close(self) -> None:\n        return None")
    assert bodies(with_body) == ["Backend.close"]  # the check bites


def private_imports(path: Path, source: str | None = None) -> list[str]:
    """The names with a leading underscore a module imports from another."""
    tree = ast.parse(path.read_text() if source is None else source)
    return [f"{path.relative_to(HOME)}:{node.lineno} imports {alias.name}"
            for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_another_modules_private_names() -> None:
    """A name with a leading underscore is its module's own: a module that needs
    one of another module's means a rule is written in two places."""
    assert [found for _, path in modules() for found in private_imports(path)] == []
    path = HOME / "views" / "gene_reads.py"
    source = path.read_text() + "\nfrom ..storage.rows import _blob\n"
    assert private_imports(path, source) != []  # the check bites
