"""Unit tests for every rule of the Memory API, on the real store."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import (
    UNSET,
    AccessPolicy,
    Category,
    DataPolicy,
    DeniedMemory,
    ErrorCode,
    GeneMemory,
    ManualClock,
    MemoryStore,
    RetentionPolicy,
    Scope,
    SharePolicy,
)

from .conftest import ALL_BACKENDS
from .helpers import RETAIN_1_DAY, actions, audit_lines, code_of, gene_id

A, B, C = gene_id("a"), gene_id("b"), gene_id("c")


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every rule also through a transaction-mode pgbouncer."""
    kind: str = request.param
    return kind


Gene = Callable[..., GeneMemory]


@pytest.fixture
def gene(store: MemoryStore) -> Gene:
    def make(gid: str = A, domain: str | None = "fmt", agent: str = "agent") -> GeneMemory:
        return store.for_gene(agent, gid, domain)
    return make


# -- entries -------------------------------------------------------------------

def test_entry_fields_and_json(gene: Gene, clock: ManualClock) -> None:
    entry = gene().write_memory("fmt/indent", b"\x00\xff4", "PREFERENCE")
    expected_id = hashlib.sha256(b"agent\x00fmt/indent").hexdigest()
    data = entry.to_json()
    assert data == {
        "entryId": expected_id,
        "category": "PREFERENCE",
        "key": "fmt/indent",
        "value": base64.b64encode(b"\x00\xff4").decode(),
        "createdBy": A,
        "lastAccessedBy": A,
        "createdAt": "2026-03-01T12:00:00.000000Z",
        "updatedAt": "2026-03-01T12:00:00.000000Z",
        "accessPolicy": {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN",
                         "sharePolicy": "PRIVATE"},
        "retentionPolicy": None,
    }
    clock.advance(seconds=5)
    again = gene(B).write_memory("fmt/indent", b"8", "PREFERENCE")
    assert again.entry_id == expected_id
    assert again.created_by == A and again.last_accessed_by == B
    assert again.created_at == "2026-03-01T12:00:00.000000Z"
    assert again.updated_at == "2026-03-01T12:00:05.000000Z"


def test_read_missing_is_none_and_category_must_match(gene: Gene) -> None:
    g = gene()
    assert g.read_memory("nope") is None
    g.write_memory("k", b"v", Category.CACHE)
    assert g.read_memory("k", "PREFERENCE") is None
    entry = g.read_memory("k", "CACHE")
    assert entry is not None and entry.value == b"v"


def test_last_accessed_by_read_changes_it_query_does_not(gene: Gene) -> None:
    gene(A).write_memory("k", b"v", "CONTEXT")
    assert [e.last_accessed_by for e in gene(B).query_memory()] == [A]
    assert gene(A).read_memory("k").last_accessed_by == A  # type: ignore[union-attr]
    assert gene(B).read_memory("k").last_accessed_by == B  # type: ignore[union-attr]
    assert gene(C).query_memory()[0].last_accessed_by == B
    assert gene(C).read_memory("k").created_by == A  # type: ignore[union-attr]


# -- scopes --------------------------------------------------------------------

def policy(read: str, write: str = "SAME_DOMAIN", share: str = "PRIVATE") -> dict[str, str]:
    return {"readScope": read, "writeScope": write, "sharePolicy": share}


def test_creator_gene_only(gene: Gene, rot: Path) -> None:
    gene(A).write_memory("k", b"v", "CONTEXT", policy("CREATOR_GENE_ONLY", "CREATOR_GENE_ONLY"))
    assert gene(A).read_memory("k") is not None
    assert code_of(lambda: gene(B).read_memory("k")) is ErrorCode.ACCESS_DENIED
    assert code_of(lambda: gene(B).write_memory("k", b"x", "CONTEXT")) is ErrorCode.ACCESS_DENIED
    assert code_of(lambda: gene(B).delete_memory("k")) is ErrorCode.ACCESS_DENIED
    assert gene(B).query_memory() == []  # left out, not reported
    assert gene(A).read_memory("k").value == b"v"  # type: ignore[union-attr]
    denied = [line for line in audit_lines(rot) if line["action"] == "access_denied"]
    assert [(d["operation"], d["actor"]) for d in denied] == [
        ("read", B), ("write", B), ("delete", B)]


def test_same_domain(gene: Gene) -> None:
    gene(A, "fmt").write_memory("k", b"v", "PATTERN")
    assert gene(B, "fmt").read_memory("k") is not None
    gene(B, "fmt").write_memory("k", b"w", "PATTERN")
    assert code_of(lambda: gene(C, "net").read_memory("k")) is ErrorCode.ACCESS_DENIED
    assert code_of(lambda: gene(C, "net").delete_memory("k")) is ErrorCode.ACCESS_DENIED
    # The creator is always in its own domain, even one it does not declare.
    gene(C, None).write_memory("mine", b"v", "PATTERN")
    assert gene(C, None).read_memory("mine") is not None
    assert code_of(lambda: gene(B, None).read_memory("mine")) is ErrorCode.ACCESS_DENIED


def test_all_genes(gene: Gene) -> None:
    gene(A).write_memory("k", b"v", "CACHE", policy("ALL_GENES", "ALL_GENES"))
    assert gene(C, "other").read_memory("k") is not None
    gene(C, "other").delete_memory("k")
    assert gene(A).read_memory("k") is None


def test_read_all_but_write_creator_only(gene: Gene) -> None:
    gene(A).write_memory("k", b"v", "CACHE", policy("ALL_GENES", "CREATOR_GENE_ONLY"))
    assert gene(B).read_memory("k") is not None
    assert code_of(lambda: gene(B).write_memory("k", b"x", "CACHE")) is ErrorCode.ACCESS_DENIED
    assert gene(A).read_memory("k").value == b"v"  # type: ignore[union-attr]


@pytest.mark.parametrize("pol", [policy("DEPLOYER_CONFIGURED"),
                                 policy("SAME_DOMAIN", "DEPLOYER_CONFIGURED")])
def test_deployer_configured_is_refused_on_write(gene: Gene, rot: Path, pol: dict[str, str]
                                                 ) -> None:
    assert code_of(lambda: gene().write_memory("k", b"v", "CACHE", pol)) is ErrorCode.ACCESS_DENIED
    assert gene().read_memory("k") is None
    assert actions(rot) == [("access_denied", "k")]


@pytest.mark.parametrize("share", ["ANONYMIZED_SHARE", "KNOWLEDGE_GENE"])
def test_sharing_needs_anonymization(store: MemoryStore, gene: Gene, share: str) -> None:
    pol = policy("SAME_DOMAIN", "SAME_DOMAIN", share)
    assert code_of(lambda: gene().write_memory("k", b"v", "CACHE", pol)) is ErrorCode.ACCESS_DENIED
    store.create_agent("anon", data_policy=DataPolicy(None, anonymization_supported=True))
    entry = gene(agent="anon").write_memory("k", b"v", "CACHE", pol)
    assert entry.access_policy.share_policy is SharePolicy(share)


def test_policy_dataclasses_accepted(gene: Gene) -> None:
    pol = AccessPolicy(Scope.ALL_GENES, Scope.CREATOR_GENE_ONLY, SharePolicy.PRIVATE)
    ret = RetentionPolicy(7, True, False)
    entry = gene().write_memory("k", b"v", Category.PATTERN, pol, ret)
    assert entry.access_policy == pol and entry.retention_policy == ret
    assert entry.to_json()["retentionPolicy"] == {
        "maxRetentionDays": 7, "autoDeleteOnTermination": True, "anonymizationSupported": False}


# -- replacing entries ---------------------------------------------------------

def test_replacement_keeps_creator_and_policies(gene: Gene) -> None:
    gene(A).write_memory("k", b"v", "CACHE", policy("ALL_GENES", "ALL_GENES"), RETAIN_1_DAY)
    entry = gene(B, "x").write_memory("k", b"w", "CACHE")
    assert entry.created_by == A
    assert entry.access_policy.read_scope is Scope.ALL_GENES
    assert entry.retention_policy == RetentionPolicy(1, False, False)
    # Passing the very same policies is fine too.
    gene(B, "x").write_memory("k", b"z", "CACHE", policy("ALL_GENES", "ALL_GENES"), RETAIN_1_DAY)


@pytest.mark.parametrize("change", [
    {"access_policy": {"readScope": "ALL_GENES", "writeScope": "SAME_DOMAIN",
                       "sharePolicy": "PRIVATE"}},
    {"retention_policy": RETAIN_1_DAY},
    {"retention_policy": None},
])
def test_only_creator_changes_policies(gene: Gene, rot: Path, change: dict[str, object]) -> None:
    gene(A).write_memory("k", b"v", "CACHE", retention_policy={
        "maxRetentionDays": 9, "autoDeleteOnTermination": False, "anonymizationSupported": False})
    before = gene(A).read_memory("k")
    err = code_of(lambda: gene(B).write_memory("k", b"w", "CACHE", **change))  # type: ignore[arg-type]
    assert err is ErrorCode.ACCESS_DENIED
    assert gene(A).read_memory("k") == before
    assert actions(rot)[-1] == ("access_denied", "k")
    updated = gene(A).write_memory("k", b"w", "CACHE", **change)  # type: ignore[arg-type]
    assert updated.value == b"w"


def test_retention_null_resets_to_data_policy(gene: Gene) -> None:
    gene(A).write_memory("k", b"v", "CACHE", retention_policy=RETAIN_1_DAY)
    assert gene(A).write_memory("k", b"v", "CACHE", retention_policy=None).retention_policy is None
    assert gene(A).write_memory("k", b"v", "CACHE", retention_policy=UNSET).retention_policy is None


def test_write_stores_the_category_given(gene: Gene) -> None:
    gene().write_memory("k", b"v", "CACHE")
    assert gene().write_memory("k", b"v", "PREFERENCE").category is Category.PREFERENCE
    assert gene().read_memory("k", "CACHE") is None


# -- delete --------------------------------------------------------------------

def test_delete(gene: Gene, rot: Path, store: MemoryStore) -> None:
    assert code_of(lambda: gene().delete_memory("never")) is ErrorCode.NOT_FOUND
    gene().write_memory("k", b"vv", "CACHE")
    gene().delete_memory("k")
    assert gene().read_memory("k") is None
    assert store.usage("agent") == (0, 10 * 1024 * 1024)
    assert actions(rot) == [("write", "k"), ("delete", "k")]


def _count_writes(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every write transaction the backend opens (the real one still runs)."""
    opened: list[str] = []
    real = store.backend.write

    def counted(agent_id: str) -> Any:
        opened.append(agent_id)
        return real(agent_id)

    monkeypatch.setattr(store.backend, "write", counted)
    return opened


def test_delete_of_a_missing_key_opens_no_write_transaction(
        gene: Gene, rot: Path, store: MemoryStore, clock: ManualClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A delete that finds nothing changes nothing, so it takes no lock and writes
    nothing (issue 16): the gene's and the deployer's alike."""
    gene().write_memory("short", b"v", "CACHE", retention_policy=RETAIN_1_DAY)
    opened = _count_writes(store, monkeypatch)
    assert code_of(lambda: gene().delete_memory("never")) is ErrorCode.NOT_FOUND
    assert code_of(lambda: store.deployer("agent").delete_key("never")) is ErrorCode.NOT_FOUND
    assert opened == []
    # Something has expired: the delete purges it (a write), then finds nothing.
    clock.advance(days=2)
    assert code_of(lambda: gene().delete_memory("never")) is ErrorCode.NOT_FOUND
    assert opened == ["agent"]
    assert actions(rot) == [("write", "short"), ("expire", "short")]
    # A key that is there is still deleted in a write transaction.
    gene().write_memory("k", b"v", "CACHE")
    gene().delete_memory("k")
    assert opened == ["agent"] * 3


def test_agent_ids_with_quotes_and_percent_signs(store: MemoryStore, rot: Path) -> None:
    """The agent id is sent as a quoted literal with BEGIN (one round trip on
    PostgreSQL): quotes, backslashes and ``%s`` in it stay plain text."""
    for agent in ("o'k", "back\\slash", "50%s", "x'; DROP TABLE memory_agents; --"):
        store.create_agent(agent)
        g = store.for_gene(agent, A, "fmt")
        g.write_memory("k", b"v", "CACHE")
        assert g.read_memory("k") is not None
        g.delete_memory("k")
        assert store.usage(agent)[0] == 0
    assert store.usage("agent")[0] == 0


# -- genes without an id, genes outside agents ---------------------------------

def test_gene_without_v2_id_is_refused_everything(store: MemoryStore, rot: Path) -> None:
    g = store.for_gene("agent", None, "fmt")
    calls: list[Callable[[], object]] = [
        lambda: g.read_memory("k"), lambda: g.write_memory("k", b"v", "CACHE"),
        lambda: g.query_memory(), lambda: g.delete_memory("k"),
        lambda: g.write_memory("", b"v", "BOGUS"),  # refused before it is even validated
    ]
    for call in calls:
        assert code_of(call) is ErrorCode.ACCESS_DENIED
    assert [line["operation"] for line in audit_lines(rot)] == [
        "read", "write", "query", "delete", "write"]
    assert all(line["actor"] is None for line in audit_lines(rot))


MALFORMED_IDS = ["", "v2:", "v2:" + "A" * 64, "v2:" + "a" * 63, "v2:" + "a" * 65,
                 "v1:" + "a" * 64, " v2:" + "a" * 64, "v2:" + "a" * 64 + "\n",
                 "v2:" + "g" * 64, "formatter"]


@pytest.mark.parametrize("bad", MALFORMED_IDS, ids=repr)
def test_a_malformed_gene_id_is_no_v2_id(store: MemoryStore, rot: Path, bad: str) -> None:
    """Anything but ``v2:`` + 64 lowercase hex is refused like no id at all: every
    call MEMORY_ACCESS_DENIED and audited without an actor, nothing written, and the
    malformed id never becomes an entry's createdBy."""
    store.for_gene("agent", A, "fmt").write_memory("k", b"v", "CACHE", policy("ALL_GENES"))
    g = store.for_gene("agent", bad, "fmt")
    calls: list[Callable[[], object]] = [
        lambda: g.read_memory("k"), lambda: g.write_memory("new", b"v", "CACHE"),
        lambda: g.query_memory(), lambda: g.delete_memory("k"),
    ]
    for call in calls:
        assert code_of(call) is ErrorCode.ACCESS_DENIED
    denied_lines = [line for line in audit_lines(rot) if line["action"] == "access_denied"]
    assert [line["operation"] for line in denied_lines] == ["read", "write", "query", "delete"]
    assert all(line["actor"] is None for line in denied_lines)
    assert [e.created_by for e in store.deployer("agent").list()] == [A]


def test_denied_memory_outside_an_agent(tmp_path: Path) -> None:
    from rotifer.memory import AuditLog
    audit = AuditLog(tmp_path / "audit.jsonl", tmp_path / "telemetry.jsonl")
    mem = DeniedMemory(audit=audit, actor=A)
    for call in [lambda: mem.read_memory("k"), lambda: mem.write_memory("k", b"v", "CACHE"),
                 lambda: mem.query_memory(), lambda: mem.delete_memory("k")]:
        assert code_of(call) is ErrorCode.ACCESS_DENIED
    assert len((tmp_path / "audit.jsonl").read_text().splitlines()) == 4
    assert len((tmp_path / "telemetry.jsonl").read_text().splitlines()) == 4


# -- telemetry -----------------------------------------------------------------

@pytest.mark.parametrize("env", [{}, {"ROTIFER_TELEMETRY": "0"}, {"DO_NOT_TRACK": "1"}])
def test_refusals_go_to_telemetry_unless_disabled(
        gene: Gene, rot: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROTIFER_TELEMETRY", raising=False)
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    gene(A).write_memory("k", b"v", "CACHE", policy("CREATOR_GENE_ONLY"))
    code_of(lambda: gene(B).read_memory("k"))
    telemetry = rot / "telemetry.jsonl"
    lines = telemetry.read_text().splitlines() if telemetry.exists() else []
    assert len(lines) == (0 if env else 1)
    assert actions(rot)[-1] == ("access_denied", "k")  # the audit line is written either way
    if lines:
        assert '"k"' not in lines[0]  # telemetry carries no keys or values
