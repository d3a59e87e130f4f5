"""Start-up imports only what a command uses (issue 33): checked on ``sys.modules``
of a real, fresh interpreter, since an import made by another test would hide
one here.  What each costs is measured in bench/startup.py, never here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Modules of the store (any backend) and of the gene runtimes.
STORE = ("rotifer.memory.store", "rotifer.memory.audit", "rotifer.memory.storage.backend",
         "rotifer.memory.storage.sqlite", "rotifer.memory.storage.postgres", "sqlite3", "psycopg")
RUNTIMES = ("rotifer.genes.python", "rotifer.genes.execute", "rotifer.genes.contain.kernel",
            "rotifer.genes.contain.forkserver", "rotifer.genes.contain.sandbox",
            "rotifer.genes.wasm", "wasmtime", "ctypes")
#: Layers above the memory, and its optional rooms.
ABOVE_MEMORY = ("rotifer.cli", "rotifer.console", "rotifer.genes", "rotifer.agents",
                "rotifer.langgraph", "rotifer.mcp", "langgraph", "click", "starlette")


def loaded_after(code: str, cwd: Path | None = None) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    probe = (f"import sys, json\n{code}\n"
             "sys.stdout.flush()\n"
             "sys.__stdout__.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")
    env = dict(os.environ, ROTIFER_TELEMETRY="0")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)
    assert "MODULES " in done.stdout, done.stderr
    return set(json.loads(done.stdout.rsplit("MODULES ", 1)[1]))


def under(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_import_rotifer_memory_pulls_in_no_layer_above_it() -> None:
    modules = loaded_after("import rotifer.memory")
    assert "rotifer.memory" in modules
    assert under(modules, ABOVE_MEMORY) == []


def test_the_memory_s_public_names_still_load_and_stay_below_it() -> None:
    modules = loaded_after(
        "from rotifer.memory import MemoryStore, GeneMemory, AuditLog, MemoryFilter, "
        "write_untrusted, parse_size, Category\n"
        "import rotifer.memory as m\n"
        "assert m.MemoryStore is MemoryStore and 'MemoryStore' in dir(m)\n"
        "try:\n    m.NoSuchName\nexcept AttributeError:\n    pass\n"
        "else:\n    raise SystemExit('NoSuchName resolved')")
    assert "rotifer.memory.store" in modules  # the names are real, loaded on use
    assert under(modules, ABOVE_MEMORY) == []


def test_help_imports_neither_the_store_nor_the_gene_runtimes() -> None:
    modules = loaded_after(
        "sys.argv = ['rotifer', '--help']\n"
        "from rotifer.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code")
    assert "rotifer.cli.main" in modules  # the probe did run the command
    assert under(modules, STORE) == []
    assert under(modules, RUNTIMES) == []
    assert under(modules, ("rotifer.cli.transfer", "rotifer.cli.audit", "rotifer.cli.delete",
                           "rotifer.cli.show", "rotifer.console")) == []


def test_agent_list_imports_no_gene_runtime_and_no_other_command(tmp_path: Path) -> None:
    from rotifer.agents.project import Project

    Project.init(tmp_path)
    modules = loaded_after(
        "sys.argv = ['rotifer', 'agent', 'list']\n"
        "from rotifer.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code",
        cwd=tmp_path)
    assert "rotifer.cli.agent" in modules
    # The agent's containment settings are read (sandbox's Grant), nothing that runs a gene.
    assert under(modules, tuple(m for m in RUNTIMES if m != "rotifer.genes.contain.sandbox")) == []
    assert under(modules, ("rotifer.cli.transfer", "rotifer.cli.audit", "rotifer.cli.delete",
                           "rotifer.cli.show", "rotifer.memory.transfer")) == []


@pytest.mark.parametrize("name", ["agent", "console"])
def test_a_lazy_command_is_the_same_object_as_its_module_s(name: str) -> None:
    import click

    from rotifer.cli.main import cli

    command = cli.get_command(click.Context(cli), name)
    module = {"agent": "rotifer.cli.agent", "console": "rotifer.cli.console"}[name]
    attribute = {"agent": "agent_group", "console": "console_command"}[name]
    assert command is getattr(sys.modules[module], attribute)


#: The store's write path: the store itself, the engine, the audit log's writing
#: and the views a gene or the deployer acts through.
WRITE_PATH = ("rotifer.memory.store", "rotifer.memory.engine", "rotifer.memory.audit.log",
              "rotifer.memory.audit.file", "rotifer.memory.audit.text",
              "rotifer.memory.audit.index", "rotifer.memory.views")


def _agent_with_an_entry(root: Path, days: int) -> None:
    """Agent ``a`` (gene ``g``) with one entry kept ``days`` days, written a
    week ago (a store on a clock set back)."""
    import time

    from rotifer.agents.project import Project
    from rotifer.memory import MemoryStore
    from rotifer.memory.clock import ManualClock
    from tests.cli.helpers import add_gene, init_project, ok, wrap

    init_project(root)
    add_gene(root, "g", "def express(input, ctx):\n    return {}\n")
    wrap(root, "g")
    ok(root, "agent", "create", "a", "--genes", "g")
    week_ago = ManualClock(int((time.time() - 7 * 86400) * 1_000_000))
    with MemoryStore.open(Project(root).dot, clock=week_ago) as store:
        retention = {"maxRetentionDays": days, "autoDeleteOnTermination": False,
                     "anonymizationSupported": False}
        store.for_gene("a", "v2:" + "0" * 64, "d").write_memory(
            "k", b"value", "CONTEXT", None, retention)


def _list(root: Path) -> tuple[set[str], list[dict[str, object]]]:
    modules = loaded_after(
        "sys.argv = ['rotifer', 'agent', 'list', '--json']\n"
        "from rotifer.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code",
        cwd=root)
    from tests.cli.helpers import agent_list

    return modules, agent_list(root)


def test_agent_list_imports_none_of_the_store_s_write_path(tmp_path: Path) -> None:
    _agent_with_an_entry(tmp_path, days=30)
    modules, listed = _list(tmp_path)
    assert [a["usedBytes"] for a in listed] == [len("k") + len("value")]
    assert "rotifer.memory.storage.sqlite" in modules  # the probe did read the store
    assert under(modules, WRITE_PATH) == []


def test_agent_list_still_removes_what_has_expired_first(tmp_path: Path) -> None:
    """An entry past its retention is purged (and audited) before the usage is
    read, as before: there, and only there, the write path is loaded."""
    _agent_with_an_entry(tmp_path, days=1)
    modules, listed = _list(tmp_path)
    assert "rotifer.memory.store" in modules
    assert [a["usedBytes"] for a in listed] == [0]
    audit = (tmp_path / ".rotifer" / "audit.jsonl").read_text().splitlines()
    assert json.loads(audit[-1])["action"] == "expire"


def test_agent_run_loads_the_store_s_write_path_only_at_a_memory_call(tmp_path: Path) -> None:
    """The store's write path is loaded at a gene's first memory call: an agent
    whose gene makes none imports none of it; one whose gene writes does, and
    its write is made and audited as before."""
    from tests.cli.helpers import add_gene, init_project, ok, wrap

    init_project(tmp_path)
    add_gene(tmp_path, "quiet", "def express(input, ctx):\n    return {'n': 1}\n")
    add_gene(tmp_path, "talks", "def express(input, ctx):\n"
                                "    ctx.memory.write_memory('k', b'v', 'CONTEXT')\n"
                                "    return {'read': ctx.memory.read_memory('k').value.decode()}\n")
    for gene in ("quiet", "talks"):
        wrap(tmp_path, gene)
        ok(tmp_path, "agent", "create", gene, "--genes", gene, "--trust", gene)

    def run(agent: str) -> set[str]:
        return loaded_after(
            f"sys.argv = ['rotifer', 'agent', 'run', {agent!r}, '--input', '{{}}']\n"
            "from rotifer.cli.entry import main\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code",
            cwd=tmp_path)

    modules = run("quiet")
    assert "rotifer.genes.python" in modules  # the gene did run, in process
    assert under(modules, WRITE_PATH) == []
    modules = run("talks")
    assert "rotifer.memory.store" in modules
    audit = [json.loads(line) for line in
             (tmp_path / ".rotifer" / "audit.jsonl").read_text().splitlines()]
    assert [(a["action"], a["agent"], a["key"]) for a in audit] == [("write", "talks", "k")]
