"""The helpers of ``examples/wasm/`` (``rotifer.rs``, ``rotifer.h``,
``rotifer.ts``), every function of each, through a probe gene per toolchain
(``helper_probes/``) that makes one helper call per run and outputs what the
call returned: entries with every field as the store has it, lists, deletes,
the -1 retry of reads and queries, and refusals carrying the host's result,
the seed's code and the store's own message.

Runs go through ``run_wasm_gene`` on a real SQLite store, no subprocess: the
CLI path is what ``test_toolchain_examples.py`` covers."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rotifer.genes.wasm import run_wasm_gene
from rotifer.memory import AgentMemoryError, GeneMemoryAccess, MemoryStore
from tests.wasm.conftest import gene_id
from tests.wasm.example_builds import build_once, shared_cache
from tests.wasm.toolchains import build_as, build_c, build_rust

PROBES = Path(__file__).parent / "helper_probes"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "wasm"
AGENT = "agent"


def _build_rust(out: Path) -> Path:
    return build_rust(PROBES / "probe.rs", out, target="wasm32-unknown-unknown", name="probe-rs")


def _build_c(out: Path) -> Path:
    return build_c(PROBES / "probe.c", out, wasi=False, name="probe-c",
                   flags=["-mbulk-memory", f"-I{EXAMPLES / 'formatter-c'}"])


def _build_as(out: Path) -> Path:
    return build_as(PROBES / "probe.ts", out, name="probe-as")


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "rust": _build_rust, "c": _build_c, "assemblyscript": _build_as}


@pytest.fixture(scope="session")
def probes(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``probes(toolchain)``: the probe gene, built once per run (the xdist
    workers share the builds)."""
    cache = shared_cache(tmp_path_factory)
    return lambda toolchain: build_once(cache, f"probe-{toolchain}", BUILDERS[toolchain])


@pytest.fixture(params=list(BUILDERS))
def probe(request: pytest.FixtureRequest, probes: Callable[[str], Path]) -> Path:
    return probes(request.param)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / ".rotifer") as s:
        s.create_agent(AGENT)
        s.create_agent("tiny", quota_bytes=20)
        yield s


def view(store: MemoryStore, gene: str = "probe", agent: str = AGENT) -> GeneMemoryAccess:
    return store.for_gene(agent, gene_id(gene), "probe")


def call(probe: Path, memory: GeneMemoryAccess, op: str, **fields: str) -> Any:
    return run_wasm_gene(probe, {"op": op, **fields}, memory)


def as_output(entry_json: dict[str, Any]) -> dict[str, Any]:
    """A store entry's JSON as the probe prints it: value as text, scopes flat."""
    out = dict(entry_json)
    out["value"] = base64.b64decode(out["value"]).decode()
    policy = out.pop("accessPolicy")
    out.update(readScope=policy["readScope"], writeScope=policy["writeScope"],
               sharePolicy=policy["sharePolicy"])
    return out


def stored(store: MemoryStore, key: str) -> dict[str, Any]:
    [entry] = [e for e in store.deployer(AGENT).list() if e.key == key]
    return as_output(entry.to_json())


KEY = "probe/ключ/😀"
VALUE = 'a "quoted" \\ value\n\twith é, € and 😀'


def test_write_and_read_give_the_entry_with_every_field(probe: Path, store: MemoryStore) -> None:
    memory = view(store)
    written = call(probe, memory, "write", key=KEY, value=VALUE, category="PATTERN")
    assert written == {"entry": stored(store, KEY)}
    assert written["entry"]["value"] == VALUE
    assert written["entry"]["readScope"] == "SAME_DOMAIN"
    assert written["entry"]["retentionPolicy"] is None
    assert call(probe, memory, "read", key=KEY, category="PATTERN") == {"entry": stored(store, KEY)}
    assert call(probe, memory, "read", key=KEY) == {"entry": stored(store, KEY)}  # any category
    assert call(probe, memory, "read", key="probe/missing") == {"entry": None}


def test_a_write_passes_its_access_policy_on(probe: Path, store: MemoryStore) -> None:
    private = ('{"readScope":"CREATOR_GENE_ONLY","writeScope":"CREATOR_GENE_ONLY",'
               '"sharePolicy":"PRIVATE"}')
    out = call(probe, view(store), "write", key="p/k", value="v", category="CACHE",
               access=private)
    assert (out["entry"]["readScope"], out["entry"]["writeScope"]) == (
        "CREATOR_GENE_ONLY", "CREATOR_GENE_ONLY")
    # Another gene of the same domain is refused: -2 with the store's message.
    other = view(store, "other")
    with pytest.raises(AgentMemoryError) as direct:
        other.read_memory("p/k")
    assert call(probe, other, "read", key="p/k") == {"error": {
        "result": -2, "code": "MEMORY_ACCESS_DENIED", "message": direct.value.message}}


def test_big_entries_are_read_and_queried_through_the_minus_one_retry(
        probe: Path, store: MemoryStore) -> None:
    """The helpers' first buffers are 1 KiB (read) and 4 KiB (query)."""
    memory = view(store)
    big = "x" * 6000
    assert call(probe, memory, "write", key="big/1", value=big,
                category="CONTEXT")["entry"]["value"] == big
    assert call(probe, memory, "read", key="big/1")["entry"]["value"] == big
    call(probe, memory, "write", key="big/2", value=big + "2", category="CONTEXT")
    listed = call(probe, memory, "query", filter='{"keyPrefix":"big/"}')
    assert listed == {"entries": [as_output(e.to_json())
                                  for e in memory.query_memory({"keyPrefix": "big/"})]}
    assert [e["key"] for e in listed["entries"]] == ["big/2", "big/1"]  # newest first


def test_query_with_no_match_or_no_filter(probe: Path, store: MemoryStore) -> None:
    memory = view(store)
    assert call(probe, memory, "query", filter="{}") == {"entries": []}
    call(probe, memory, "write", key="q/1", value="1", category="CACHE")
    assert [e["key"] for e in call(probe, memory, "query", filter="{}")["entries"]] == ["q/1"]
    assert call(probe, memory, "query", filter='{"keyPrefix":"none/"}') == {"entries": []}


def test_delete_and_not_found(probe: Path, store: MemoryStore) -> None:
    memory = view(store)
    call(probe, memory, "write", key="d/1", value="1", category="CACHE")
    assert call(probe, memory, "delete", key="d/1") == {"deleted": True}
    assert store.deployer(AGENT).list() == []
    with pytest.raises(AgentMemoryError) as direct:
        memory.delete_memory("d/1")
    assert call(probe, memory, "delete", key="d/1") == {"error": {
        "result": -12, "code": "MEMORY_NOT_FOUND", "message": direct.value.message}}


@pytest.mark.parametrize(("op", "fields", "result", "code"), [
    ("write", {"key": "", "value": "v", "category": "CACHE"}, -10, "MEMORY_INVALID_INPUT"),
    ("read", {"key": "k" * 1025}, -10, "MEMORY_INVALID_INPUT"),
    ("query", {"filter": '{"colour":"red"}'}, -10, "MEMORY_INVALID_INPUT"),
    ("query", {"filter": "not json"}, -10, "MEMORY_INVALID_INPUT"),
    ("write", {"key": "k", "value": "v", "category": "CACHE",
               "access": '{"readScope":"DEPLOYER_CONFIGURED","writeScope":"SAME_DOMAIN",'
                         '"sharePolicy":"PRIVATE"}'}, -2, "MEMORY_ACCESS_DENIED"),
], ids=["empty-key", "long-key", "unknown-filter", "bad-json", "deployer-scope"])
def test_refusals_carry_the_seed_code_and_the_host_message(
        probe: Path, store: MemoryStore, op: str, fields: dict[str, str], result: int,
        code: str) -> None:
    out = call(probe, view(store), op, **fields)
    assert out["error"]["result"] == result
    assert out["error"]["code"] == code
    assert out["error"]["message"]  # the host's words, e.g. which field is wrong
    assert store.deployer(AGENT).list() == []


def test_quota_exceeded_and_denied_memory(probe: Path, store: MemoryStore) -> None:
    out = call(probe, view(store, agent="tiny"), "write", key="quota/k", value="x" * 40,
               category="CACHE")
    assert (out["error"]["result"], out["error"]["code"]) == (-8, "MEMORY_QUOTA_EXCEEDED")
    assert store.deployer("tiny").list() == []
    # A gene without a v2 id: every call is -2.
    denied = store.for_gene(AGENT, None, "probe")
    for op, fields in [("read", {"key": "k"}), ("query", {"filter": "{}"}),
                       ("delete", {"key": "k"}),
                       ("write", {"key": "k", "value": "v", "category": "CACHE"})]:
        assert call(probe, denied, op, **fields)["error"]["code"] == "MEMORY_ACCESS_DENIED", op
