"""The audit log stays true across moves, exports and imports (issue 22, items 1-3, 6).

Two stores of one project share one audit log (``.rotifer/audit.jsonl``), as
``rotifer agent move`` makes them do: every test moves or copies an agent
between real SQLite files and real PostgreSQL schemas and then asks the
store the agent lives in now: ``verify_agent`` passes, appends nothing (no
change committed anywhere is ever marked ``rolled_back``), and
``audit_history`` gives the agent's whole history, every committed change
once, numbered 1, 2, 3, ... in order, across every store it has lived in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import AgentMemoryError, ManualClock, MemoryStore
from rotifer.memory.audit.history import audit_history
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.transfer import export_agent, import_agent, move_agent

from .conftest import SchemaMaker
from .helpers import audit_lines, gene_id

PG = pytest.mark.postgres
GENE = gene_id("fmt-1")
PAIRS = [pytest.param("sqlite", "sqlite", id="sqlite-to-sqlite"),
         pytest.param("sqlite", "postgres", id="sqlite-to-postgres", marks=PG),
         pytest.param("postgres", "sqlite", id="postgres-to-sqlite", marks=PG)]
KINDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=PG)]

Opener = Callable[[str, str], MemoryStore]


@pytest.fixture
def opener(tmp_path: Path, rot: Path, clock: ManualClock, request: pytest.FixtureRequest
           ) -> Iterator[Opener]:
    """``opener(kind, name)``: a store on a new SQLite file or PostgreSQL schema,
    all of them writing to the one audit log of the project ``rot``."""
    opened: list[MemoryStore] = []
    schemas: list[str] = []
    maker: list[SchemaMaker] = []
    urls: dict[str, str] = {}

    def make(kind: str, name: str) -> MemoryStore:
        if name not in urls:
            if kind == "sqlite":
                urls[name] = f"sqlite:{tmp_path / (name + '.db')}"
            else:
                if not maker:
                    maker.append(request.getfixturevalue("pg_schemas"))
                schema, urls[name] = maker[0].new()
                schemas.append(schema)
        store = MemoryStore.open(rot, url=urls[name], clock=clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
    for schema in schemas:
        maker[0].drop(schema)


def work(store: MemoryStore, clock: ManualClock, tag: str, n: int = 3) -> None:
    """A few changes of every kind: writes, an update, a CACHE write, a delete."""
    memory = store.for_gene("m", GENE, "formatter")
    for i in range(n):
        clock.advance(seconds=1)
        memory.write_memory(f"formatter/{tag}{i}", f"{tag}{i}".encode(), "PREFERENCE")
    memory.write_memory(f"formatter/{tag}0", b"again", "PREFERENCE")
    memory.write_memory(f"formatter/{tag}-cache", b"c" * 20, "CACHE")
    memory.delete_memory(f"formatter/{tag}1")


def assert_true(store: MemoryStore, rot: Path, *, rolled_back: int = 0
                ) -> list[dict[str, Any]]:
    """verify passes and appends nothing; show is the whole history in order; the
    log holds ``rolled_back`` lines only for changes that never committed."""
    before = audit_lines(rot)
    report = verify_agent(store, "m")
    assert report.ok, report.message
    assert report.repaired == 0, report.message
    assert audit_lines(rot) == before, "verify appended to a true log"
    assert len([x for x in before if x["action"] == "rolled_back"]) == rolled_back
    shown = list(reversed(list(audit_history(store, "m"))))
    seqs = [x["seq"] for x in shown if x.get("seq") is not None]
    changes = [s for i, s in enumerate(seqs) if i == 0 or seqs[i - 1] != s]
    assert changes == list(range(1, store.agent_record("m").next_seq)), changes
    return shown


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_a_move_and_back_keeps_the_log_true(opener: Opener, rot: Path, clock: ManualClock,
                                            src: str, dst: str) -> None:
    """Item 1-3: a move (CACHE left behind), work there, a move back, work again."""
    a = opener(src, "a")
    a.create_agent("m")
    work(a, clock, "a")
    assert_true(a, rot)
    b = opener(dst, "b")
    move_agent(a, b, "m")
    shown = assert_true(b, rot)
    actions = [x["action"] for x in shown]
    assert actions.index("move") < actions.index("import_agent")
    assert "move_drop" in actions  # the CACHE entry left behind
    assert [x["key"] for x in shown if x["action"] == "write"][:3] == \
        [f"formatter/a{i}" for i in range(3)]  # the history from before the move
    work(b, clock, "b")
    assert_true(b, rot)
    move_agent(b, a, "m", keep_cache=True)
    work(a, clock, "c")
    shown = assert_true(a, rot)
    assert [x["action"] for x in shown].count("import_agent") == 2


@pytest.mark.parametrize("kind", KINDS)
def test_export_then_import_into_a_second_store(opener: Opener, rot: Path, clock: ManualClock,
                                                tmp_path: Path, kind: str) -> None:
    """Item 2: the copy and the original both go on; each one's history is its own."""
    a = opener(kind, "a")
    a.create_agent("m")
    work(a, clock, "a")
    export_agent(a, "m", tmp_path / "m.json")
    b = opener(kind, "b")
    import_agent(b, tmp_path / "m.json")
    assert_true(a, rot)
    assert_true(b, rot)
    work(a, clock, "x")  # both go on: the history forks at the export
    work(b, clock, "y")
    work(a, clock, "z")
    shown_a, shown_b = assert_true(a, rot), assert_true(b, rot)
    assert not any(str(x["key"]).startswith("formatter/y") for x in shown_a)
    assert not any(str(x["key"]).startswith(("formatter/x", "formatter/z")) for x in shown_b)
    assert any(x["action"] == "import_agent" for x in shown_b)


KILLED_MOVE = '''
import os, signal, sys
from pathlib import Path
from rotifer.memory import MemoryStore
from rotifer.memory.storage.sqlite.transaction import SqliteTransaction
from rotifer.memory.transfer import move_agent

def die(self, agent_id):  # the copy committed; the source is about to drop the agent
    os.kill(os.getpid(), signal.SIGKILL)

SqliteTransaction.delete_agent = die
if sys.argv[2].startswith("postgres"):
    from rotifer.memory.storage.postgres.transaction import PostgresTransaction
    PostgresTransaction.delete_agent = die
rot = Path(sys.argv[1])
move_agent(MemoryStore.open(rot, url=sys.argv[2]), MemoryStore.open(rot, url=sys.argv[3]), "m")
'''


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_a_move_killed_after_the_copy_committed_is_retried(
        opener: Opener, rot: Path, clock: ManualClock, src: str, dst: str,
        tmp_path: Path) -> None:
    """SIGKILL between the destination's commit and the source's: both stores hold
    the agent.  The retried move finds the destination's copy exactly what it
    would copy now, removes it (audited there) and moves again; the history is
    whole.  A copy that changed since is never replaced."""
    import signal
    import subprocess
    import sys

    a, b = opener(src, "a"), opener(dst, "b")
    a.create_agent("m")
    work(a, clock, "a")
    done = subprocess.run([sys.executable, "-c", KILLED_MOVE, str(rot), _url(a), _url(b)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert a.has_agent("m") and b.has_agent("m")
    assert verify_agent(a, "m").ok  # the source's move: never committed
    move_agent(a, b, "m")
    assert not a.has_agent("m")
    shown = assert_true(b, rot, rolled_back=1)  # the killed move's, by verify above
    assert [x["action"] for x in shown].count("import_agent") == 1
    # A destination copy that went on by itself is never replaced.
    work(b, clock, "b")
    c = opener(src, "c")
    export = tmp_path / "m.json"
    export_agent(b, "m", export)
    import_agent(c, export)
    c.for_gene("m", GENE, "formatter").write_memory("formatter/new", b"1", "PREFERENCE")
    with pytest.raises(AgentMemoryError) as info:
        move_agent(b, c, "m")
    assert "already has a memory" in info.value.message
    assert b.has_agent("m") and c.has_agent("m")


def _url(store: MemoryStore) -> str:
    backend = store.backend
    path = getattr(backend, "path", None)
    return f"sqlite:{path}" if path is not None else str(backend.url)


# -- property: any sequence of changes, moves, copies and re-creations ------------

import contextlib  # noqa: E402

import hypothesis.strategies as st  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

OPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, 5), st.sampled_from(["PREFERENCE", "CACHE"])),
    st.tuples(st.just("delete"), st.integers(0, 5), st.none()),
    st.tuples(st.just("move"), st.booleans(), st.none()),
    st.tuples(st.just("copy"), st.none(), st.none()),
    st.tuples(st.just("recreate"), st.none(), st.none())), min_size=1, max_size=10)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_any_history_of_moves_and_copies_verifies(tmp_path_factory: pytest.TempPathFactory,
                                                  ops: list[tuple[Any, Any, Any]]) -> None:
    """Against the plain model "the entries each store holds": after every step,
    every store holding the agent verifies, appends nothing, and its history
    (show) replays to exactly its entries, numbered 1, 2, 3, ... without gaps."""
    root = tmp_path_factory.mktemp("prop")
    rot, clock = root / ".rotifer", ManualClock("2026-03-01T12:00:00Z")
    stores = [MemoryStore.open(rot, url=f"sqlite:{root / f'{n}.db'}", clock=clock)
              for n in range(3)]
    try:
        live = 0  # the store the agent lives in; 2 receives copies
        stores[0].create_agent("m")
        for op, arg, category in ops:
            clock.advance(seconds=1)
            store = stores[live]
            memory = store.for_gene("m", GENE, "formatter")
            if op == "write":
                memory.write_memory(f"formatter/{arg}", b"v" * arg, category)
            elif op == "delete":
                with contextlib.suppress(AgentMemoryError):  # not there: nothing to delete
                    memory.delete_memory(f"formatter/{arg}")
            elif op == "move":
                live = 1 - live
                move_agent(store, stores[live], "m", keep_cache=bool(arg))
            elif op == "copy":
                if stores[2].has_agent("m"):
                    stores[2].drop_agent("m")
                export_agent(store, "m", root / "m.json")
                import_agent(stores[2], root / "m.json")
                stores[2].for_gene("m", GENE, "formatter").write_memory(
                    "formatter/copy", b"c", "PATTERN")
            else:
                store.drop_agent("m")
                store.create_agent("m")
            for holder in stores:
                if holder.has_agent("m"):
                    _replays_to_its_entries(holder, rot)
    finally:
        for store in stores:
            store.close()


def _replays_to_its_entries(store: MemoryStore, rot: Path) -> None:
    before = audit_lines(rot)
    report = verify_agent(store, "m")
    assert report.ok and report.repaired == 0, report.message
    assert audit_lines(rot) == before
    shown = list(reversed(list(audit_history(store, "m"))))
    seqs = [x["seq"] for x in shown if x.get("seq") is not None]
    changes = [s for i, s in enumerate(seqs) if i == 0 or seqs[i - 1] != s]
    # numbered 1, 2, 3, ... without gaps up to the store's count: the history of
    # the memory the agent has now, from its creation, through its moves and copies
    assert changes == list(range(1, store.agent_record("m").next_seq))
    model: dict[str, int] = {}
    for line in shown:
        if line["action"] in ("write", "update", "import"):
            model[line["key"]] = line["bytes"]
        elif line["action"] in ("delete", "evict", "expire", "move_out", "move_drop"):
            model.pop(line["key"], None)
        elif line["action"] == "import_agent":
            model.clear()
    entries = {e.key: len(e.key.encode()) + len(e.value) for e in store.deployer("m").list()}
    assert model == entries
