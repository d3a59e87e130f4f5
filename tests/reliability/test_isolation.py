"""Isolation: an adversarial gene, in Python and in WASM, tries every way into another gene's entries.

Each scene is a real project with one agent.  Its genes make exactly the one
memory call their input asks for, with the request the test chose
(``genes/performer.py`` through ``ctx.memory``, ``genes/probe.wat`` through the
host functions, byte for byte): the victim (domain ``bank``) writes its
entries first; then the agent's genome is switched (``update-genes``, which
keeps the memory) to the attacker (domain ``evil``), a sibling (another gene
of domain ``bank``) or an upgraded victim, and each attempt runs through
``run_agent``.  Every refusal must be MEMORY_ACCESS_DENIED (-2 in WASM) with
exactly one new ``access_denied`` audit line naming the attacker's v2 id; a
key that merely looks like the victim's must be shown to be a different
entry; and after all of it the victim's entries are exactly as they were.
"""

from __future__ import annotations

import base64
import json
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rotifer.agents.build import compile_gene, wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent
from rotifer.genes.errors import InvalidInput
from rotifer.memory import AgentMemoryError, entry_id
from tests.audit_reading import audit_lines
from tests.genes.helpers import write_gene

HERE = Path(__file__).parent
PERFORMER = (HERE / "genes" / "performer.py").read_text()
PROBE = (HERE / "genes" / "probe.wat").read_text()
AGENT = "target"
WASM_CODES = {-1: "OUT_TOO_SMALL", -2: "MEMORY_ACCESS_DENIED", -4: "DEADLINE",
              -8: "MEMORY_QUOTA_EXCEEDED", -10: "MEMORY_INVALID_INPUT",
              -12: "MEMORY_NOT_FOUND", -13: "MEMORY_STORAGE_ERROR"}
DENIED, INVALID, NOT_FOUND = "MEMORY_ACCESS_DENIED", "MEMORY_INVALID_INPUT", "MEMORY_NOT_FOUND"


def policy(read: str = "SAME_DOMAIN", write: str = "SAME_DOMAIN",
           share: str = "PRIVATE") -> dict[str, str]:
    return {"readScope": read, "writeScope": write, "sharePolicy": share}


def retention(days: int | None) -> dict[str, Any]:
    return {"maxRetentionDays": days, "autoDeleteOnTermination": False,
            "anonymizationSupported": False}


CAFE_NFC = unicodedata.normalize("NFC", "bank/café")
CAFE_NFD = unicodedata.normalize("NFD", "bank/café")
LONG_KEY = "bank/" + "s" * 1019  # exactly 1024 bytes
assert CAFE_NFC != CAFE_NFD and len(LONG_KEY.encode()) == 1024

#: The victim's entries: key -> (category, access policy, retention policy or absent).
VICTIM: dict[str, tuple[str, dict[str, str] | None, dict[str, Any] | None]] = {
    "bank/secret": ("PREFERENCE", None, None),                       # the default policy
    "bank/secretive": ("PATTERN", None, None),
    "bank/creator": ("CONTEXT", policy("CREATOR_GENE_ONLY", "CREATOR_GENE_ONLY"), None),
    "bank/open-read": ("PATTERN", policy("ALL_GENES", "CREATOR_GENE_ONLY"), None),
    "bank/open-write": ("CACHE", policy("ALL_GENES", "ALL_GENES"), retention(30)),
    "bank/100%_sure": ("CONTEXT", None, None),
    CAFE_NFC: ("PREFERENCE", None, None),
    LONG_KEY: ("CACHE", None, None),
}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Outcome:
    code: str  # "ok" or the error code
    body: Any
    lines: list[dict[str, Any]]  # the audit lines the attempt added


class Scene:
    """A project with the victim's entries written and the genes registered."""

    def __init__(self, root: Path, kind: str) -> None:
        self.kind = kind
        self.project = Project.init(root)
        self.agents = Agents(self.project)
        self.ids: dict[str, str] = {}
        for name, domain in (("victim", "bank"), ("attacker", "evil"), ("sibling", "bank")):
            self.add_gene(name, domain)
        self.agents.create(AGENT, ["victim"], quota_bytes=64 * 1024)
        for key, (category, access, keep) in VICTIM.items():
            req: dict[str, Any] = {"key": key, "value": b64(f"victim:{key}".encode()),
                                   "category": category}
            if access is not None:
                req["accessPolicy"] = access
            if keep is not None:
                req["retentionPolicy"] = keep
            assert self.run("victim", "write", req).code == "ok"
        self.before = self.victim_state()

    def add_gene(self, name: str, domain: str, code: str | None = None) -> str:
        if self.kind == "python":
            write_gene(self.project.genes_dir, name, code or PERFORMER, domain=domain)
            gene = wrap_gene(self.project, name)
        else:
            (self.project.genes_dir / name / "gene.wasm").unlink(missing_ok=True)
            write_gene(self.project.genes_dir, name, code or PROBE, file="gene.wat",
                       domain=domain)
            gene = compile_gene(self.project, name)
        assert gene.v2_id is not None
        self.ids[name] = gene.v2_id
        return gene.v2_id

    def audit(self) -> list[dict[str, Any]]:
        return audit_lines(self.project.dot)

    def run(self, gene: str, op: str, req: Any) -> Outcome:
        self.agents.set_genes(AGENT, [gene])
        mark = len(self.audit())
        out = run_agent(self.project, AGENT, [op, req], hints=[])
        lines = self.audit()[mark:]
        if self.kind == "python":
            return Outcome(out["result"], out["body"], lines)
        result, body = out["result"], out["body"]
        if result >= 0:
            return Outcome("ok", body, lines)
        code = WASM_CODES[result]
        assert body["__rotifer_error"]["code"] == code, body  # the error channel agrees
        return Outcome(code, body, lines)

    def refused(self, gene: str, op: str, req: Any, key: str | None = None) -> Outcome:
        """The attempt is MEMORY_ACCESS_DENIED and audited once, naming ``gene``."""
        out = self.run(gene, op, req)
        assert out.code == DENIED, (op, req, out)
        assert [(x["action"], x["actor"], x["key"]) for x in out.lines] == [
            ("access_denied", self.ids[gene], key if key is not None else req.get("key"))
        ], out.lines
        return out

    def victim_state(self) -> dict[str, Any]:
        """Everything about the victim's entries but lastAccessedBy (which an allowed
        read may change), read below the rules."""
        with self.project.open_store(AGENT) as store:
            entries = {e.key: e.to_json() for e in store.deployer(AGENT).list()
                       if e.key in VICTIM}
        for doc in entries.values():
            doc.pop("lastAccessedBy")
        return entries

    def unchanged(self) -> None:
        assert self.victim_state() == self.before


@pytest.fixture(params=["python", "wasm"])
def scene(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
          ) -> Iterator[Scene]:
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    monkeypatch.delenv("ROTIFER_MEMORY_URL", raising=False)
    monkeypatch.setenv("ROTIFER_TELEMETRY", "1")
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    yield Scene(tmp_path / "proj", request.param)


# -- the attacks ------------------------------------------------------------------

@pytest.mark.reliability(
    "Isolation", "A gene of another domain reads, overwrites and deletes SAME_DOMAIN and "
    "CREATOR_GENE_ONLY entries (Python and WASM)",
    "every attempt MEMORY_ACCESS_DENIED (-2), one access_denied audit line with the "
    "attacker's id each, a telemetry event; entries untouched")
def test_other_domain_cannot_read_write_or_delete(scene: Scene) -> None:
    """The attacker reads (with and without the right category), overwrites (same
    category, other category, empty value) and deletes each entry it has no scope for."""
    closed = [k for k, (_, access, _) in VICTIM.items()
              if access is None or access["readScope"] != "ALL_GENES"]
    attempts = 0
    for key in closed:
        category = VICTIM[key][0]
        scene.refused("attacker", "read", {"key": key})
        scene.refused("attacker", "read", {"key": key, "category": category})
        for cat, value in ((category, b"pwned"), ("CACHE", b"pwned"), (category, b"")):
            scene.refused("attacker", "write", {"key": key, "value": b64(value),
                                                "category": cat})
        scene.refused("attacker", "delete", {"key": key})
        attempts += 6
    # an entry it may read is still not one it may change
    assert scene.run("attacker", "read", {"key": "bank/open-read"}).code == "ok"
    scene.refused("attacker", "write", {"key": "bank/open-read", "value": b64(b"x"),
                                        "category": "PATTERN"})
    scene.refused("attacker", "delete", {"key": "bank/open-read"})
    scene.unchanged()
    telemetry = [json.loads(x) for x in
                 (scene.project.dot / "telemetry.jsonl").read_text().splitlines()]
    mine = [t for t in telemetry if t["event"] == "memory_access_denied"
            and t["actor"] == scene.ids["attacker"]]
    assert len(mine) == attempts + 2


@pytest.mark.reliability(
    "Isolation", "Queries for entries the gene may not read: no filter, prefixes, `%` and `_` "
    "in prefixes, categories, a prefix that is a whole key",
    "only entries the gene may read come back; `%` and `_` match only themselves")
def test_queries_never_show_unreadable_entries(scene: Scene) -> None:
    """The attacker writes its own entries ``evil/a``, ``evil/%x``, ``evil/_y`` and queries
    with no filter, with prefixes ``bank/``, ``bank/secret``, ``%``, ``_``, ``bank/%``,
    ``bank/_ecret``, ``bank/100%``, ``evil/%``, ``evil/_`` and with each category."""
    for key in ("evil/a", "evil/%x", "evil/_y"):
        assert scene.run("attacker", "write", {"key": key, "value": b64(b"mine"),
                                               "category": "CACHE"}).code == "ok"
    readable = {"bank/open-read", "bank/open-write"}
    own = {"evil/a", "evil/%x", "evil/_y"}

    def keys(filter: dict[str, Any]) -> set[str]:
        out = scene.run("attacker", "query", filter)
        assert out.code == "ok" and not out.lines, out
        return {e["key"] for e in out.body}

    assert keys({}) == readable | own
    assert keys({"limit": 1000}) == readable | own
    assert keys({"keyPrefix": "bank/"}) == readable
    assert keys({"keyPrefix": "bank/secret"}) == set()
    assert keys({"keyPrefix": "bank/open-read"}) == {"bank/open-read"}
    for pattern in ("%", "_", "bank/%", "bank/_ecret", "bank/100%", "bank/100%_", "%secret",
                    "bank/open_"):
        assert keys({"keyPrefix": pattern}) == set(), pattern
    assert keys({"keyPrefix": "evil/%"}) == {"evil/%x"}
    assert keys({"keyPrefix": "evil/_"}) == {"evil/_y"}
    for category in ("PREFERENCE", "PATTERN", "CONTEXT", "CACHE"):
        assert keys({"category": category}) == {
            k for k in readable | own
            if (VICTIM[k][0] if k in VICTIM else "CACHE") == category}
    # the victim's own domain sees its SAME_DOMAIN entries, so the filter itself works
    out = scene.run("sibling", "query", {"keyPrefix": "bank/100%"})
    assert {e["key"] for e in out.body} == {"bank/100%_sure"}
    scene.unchanged()


LOOKALIKES = [
    "BANK/SECRET", "Bank/Secret", "bank/Secret",   # case
    CAFE_NFD,                                       # NFD of the victim's NFC key
    unicodedata.normalize("NFKC", "ｂａｎｋ/secret"),  # fullwidth folded: really the same key
    "bank/secre", "bank/secret/x", "bank/secret ", " bank/secret", "bank//secret",
    "bank/secret\u200b", "bank\\secret",
]


@pytest.mark.reliability(
    "Isolation", "Keys that look like the victim's: other case, NFD of an NFC key, prefixes "
    "and extensions of a key, spaces, zero-width characters",
    "each is a different entry (own entryId, created by the attacker) or, if it is the "
    "very same string, refused; the victim's entry never changes")
def test_lookalike_keys_never_reach_the_victim(scene: Scene) -> None:
    """For each look-alike key the attacker reads (null, or denied when the string is
    really the victim's), deletes (MEMORY_NOT_FOUND), writes (a new entry of its own) and
    reads back its own value."""
    for key in LOOKALIKES:
        if key in VICTIM:  # NFKC folding gave back the very key: it is the victim's
            scene.refused("attacker", "read", {"key": key})
            continue
        read = scene.run("attacker", "read", {"key": key})
        assert (read.code, read.body, read.lines) == ("ok", None, []), key
        gone = scene.run("attacker", "delete", {"key": key})
        assert gone.code == NOT_FOUND, key
        wrote = scene.run("attacker", "write", {"key": key, "value": b64(b"attacker"),
                                                "category": "PREFERENCE"})
        assert wrote.code == "ok", (key, wrote)
        entry = wrote.body
        assert entry["key"] == key and entry["createdBy"] == scene.ids["attacker"]
        assert entry["entryId"] == entry_id(AGENT, key)
        assert entry["entryId"] not in {entry_id(AGENT, k) for k in VICTIM}
        assert [x["action"] for x in wrote.lines] == ["write"]  # a new entry, not an update
        back = scene.run("attacker", "read", {"key": key})
        assert base64.b64decode(back.body["value"]) == b"attacker"
    victim = scene.run("victim", "read", {"key": CAFE_NFC})
    assert base64.b64decode(victim.body["value"]) == f"victim:{CAFE_NFC}".encode()
    scene.unchanged()


@pytest.mark.reliability(
    "Isolation", "Keys with NUL bytes, and a 1025-byte key that starts with the victim's "
    "1024-byte key",
    "MEMORY_INVALID_INPUT (-10), never cut down to the victim's key; nothing written; the "
    "1024-byte key itself is refused as the victim's")
def test_nul_and_overlong_keys_are_refused_not_truncated(scene: Scene) -> None:
    """The attacker reads, writes and deletes ``bank/secret\\0``, ``bank/secret\\0x``,
    ``\\0bank/secret`` and the victim's 1024-byte key plus one byte; then the 1024-byte key
    itself."""
    bad = ["bank/secret\x00", "bank/secret\x00x", "\x00bank/secret", LONG_KEY + "s",
           LONG_KEY + "é", "\x00", ""]
    if scene.kind == "python":
        surrogate = "bank/secret\ud800"
        # No input carries a lone surrogate to a gene (INVALID_INPUT before it runs);
        # a Python gene that makes one itself is refused by the store.
        with pytest.raises(InvalidInput):
            scene.run("attacker", "read", {"key": surrogate})
        with scene.project.open_store(AGENT) as store:
            g = store.for_gene(AGENT, scene.ids["attacker"], "evil")
            for call in (lambda: g.read_memory(surrogate), lambda: g.delete_memory(surrogate),
                         lambda: g.write_memory(surrogate, b"x", "CACHE")):
                with pytest.raises(AgentMemoryError) as info:
                    call()
                assert info.value.code.value == INVALID
    for key in bad:
        for op, req in (("read", {"key": key}), ("delete", {"key": key}),
                        ("write", {"key": key, "value": b64(b"x"), "category": "CACHE"})):
            out = scene.run("attacker", op, req)
            assert out.code == INVALID, (op, key, out)
            assert all(x["action"] == "access_denied" for x in out.lines)
    for prefix in ("bank/secret\x00", "\x00"):
        query = scene.run("attacker", "query", {"keyPrefix": prefix})
        assert query.code == INVALID or (query.code, query.body) == ("ok", []), query
    scene.refused("attacker", "read", {"key": LONG_KEY})
    scene.refused("attacker", "write", {"key": LONG_KEY, "value": b64(b"x"),
                                        "category": "CACHE"})
    with scene.project.open_store(AGENT) as store:
        keys = {e.key for e in store.deployer(AGENT).list()}
    assert keys == set(VICTIM)
    scene.unchanged()


@pytest.mark.reliability(
    "Isolation", "A gene that may write an entry (ALL_GENES, or the same domain) changes "
    "its access, share or retention policy",
    "MEMORY_ACCESS_DENIED, audited with its id, nothing written; the same policies or none "
    "are accepted and keep the creator's")
def test_policy_changes_by_a_non_creator(scene: Scene) -> None:
    """On ``bank/open-write`` (ALL_GENES both ways, 30-day retention) the attacker writes
    with a wider, a narrower and a KNOWLEDGE_GENE access policy, a longer, a shorter and a
    null retention; the sibling does the same on the SAME_DOMAIN ``bank/secret``."""
    key, (cat, access, keep) = "bank/open-write", VICTIM["bank/open-write"]
    assert access is not None
    for changed in ({"accessPolicy": policy("ALL_GENES", "ALL_GENES", "KNOWLEDGE_GENE")},
                    {"accessPolicy": policy("CREATOR_GENE_ONLY", "CREATOR_GENE_ONLY")},
                    {"accessPolicy": policy("SAME_DOMAIN", "ALL_GENES")},
                    {"retentionPolicy": retention(3650)},
                    {"retentionPolicy": retention(1)},
                    {"retentionPolicy": None}):
        scene.refused("attacker", "write",
                      {"key": key, "value": b64(b"hijack"), "category": cat, **changed})
        if changed != {"retentionPolicy": None}:  # bank/secret's retention *is* null
            scene.refused("sibling", "write",
                          {"key": "bank/secret", "value": b64(b"hijack"),
                           "category": "PREFERENCE", **changed})
    scene.unchanged()
    # leaving the policies out, or passing the stored ones, is allowed and keeps them
    same = scene.run("attacker", "write", {"key": key, "value": b64(b"v2"), "category": cat,
                                           "accessPolicy": access, "retentionPolicy": keep})
    assert same.code == "ok", same
    assert same.body["createdBy"] == scene.ids["victim"]
    assert same.body["accessPolicy"] == access and same.body["retentionPolicy"] == keep


@pytest.mark.reliability(
    "Isolation", "DEPLOYER_CONFIGURED as a read or write scope, by any gene (even the "
    "creator of the entry)",
    "every write that sets it is MEMORY_ACCESS_DENIED and audited; nothing is written")
def test_deployer_configured_is_never_granted(scene: Scene) -> None:
    """The attacker creates its own key with DEPLOYER_CONFIGURED as read scope, as write
    scope and as both; the victim tries to switch its own entry to it."""
    for read, write in (("DEPLOYER_CONFIGURED", "SAME_DOMAIN"),
                        ("SAME_DOMAIN", "DEPLOYER_CONFIGURED"),
                        ("DEPLOYER_CONFIGURED", "DEPLOYER_CONFIGURED")):
        scene.refused("attacker", "write", {"key": "evil/dc", "value": b64(b"x"),
                                            "category": "CACHE",
                                            "accessPolicy": policy(read, write)})
        scene.refused("victim", "write", {"key": "bank/secret", "value": b64(b"x"),
                                          "category": "PREFERENCE",
                                          "accessPolicy": policy(read, write)})
    assert scene.run("attacker", "read", {"key": "evil/dc"}).body is None
    scene.unchanged()


@pytest.mark.reliability(
    "Isolation", "Another gene of the creator's own domain against CREATOR_GENE_ONLY entries",
    "read, write and delete MEMORY_ACCESS_DENIED and audited; SAME_DOMAIN entries stay "
    "shared as the seed says")
def test_creator_only_holds_inside_the_domain(scene: Scene) -> None:
    """The sibling (domain ``bank``, another gene) reads, overwrites and deletes
    ``bank/creator``; it can read ``bank/secret`` (SAME_DOMAIN)."""
    scene.refused("sibling", "read", {"key": "bank/creator"})
    scene.refused("sibling", "write", {"key": "bank/creator", "value": b64(b"x"),
                                       "category": "CONTEXT"})
    scene.refused("sibling", "delete", {"key": "bank/creator"})
    shared = scene.run("sibling", "read", {"key": "bank/secret"})
    assert base64.b64decode(shared.body["value"]) == b"victim:bank/secret"
    scene.unchanged()


@pytest.mark.reliability(
    "Isolation", "An upgraded gene (changed code -> new v2 id, wrapped or compiled again) "
    "reaches for its old CREATOR_GENE_ONLY entries",
    "read, write, delete and policy change MEMORY_ACCESS_DENIED, audited with the new id; "
    "the deployer can still delete them")
def test_upgraded_gene_loses_its_creator_only_entries(scene: Scene) -> None:
    """The victim's code changes (a comment in Python; a different buffer size in WAT, so
    the module bytes change), it is registered again, the genome points at it, and it
    tries its old entry ``bank/creator``; then the deployer deletes it."""
    old = scene.ids["victim"]
    if scene.kind == "python":
        code = PERFORMER + "\n# v2: better\n"
    else:
        code = PROBE.replace("(i32.const 262144)", "(i32.const 262000)")
        assert code != PROBE
    new = scene.add_gene("victim", "bank", code)
    assert new != old
    scene.refused("victim", "read", {"key": "bank/creator"})
    scene.refused("victim", "write", {"key": "bank/creator", "value": b64(b"x"),
                                      "category": "CONTEXT"})
    scene.refused("victim", "write", {"key": "bank/creator", "value": b64(b"x"),
                                      "category": "CONTEXT", "accessPolicy": policy()})
    scene.refused("victim", "delete", {"key": "bank/creator"})
    # SAME_DOMAIN data outlives the version, as the seed advises
    assert scene.run("victim", "read", {"key": "bank/secret"}).body is not None
    scene.unchanged()
    with scene.project.open_store(AGENT) as store:
        assert store.deployer(AGENT).delete_key("bank/creator") == 1
    last = scene.audit()[-1]
    assert (last["action"], last["actor"], last["key"]) == (
        "deployer_delete", "deployer", "bank/creator")


def test_probe_is_copied_verbatim() -> None:
    """Guard: the WAT library part of probe.wat matches the other WAT test genes."""
    lib_start, lib_end = ";; ---- rotifer WAT library v1", ";; ---- end of rotifer WAT library"
    probe = PROBE[PROBE.index(lib_start):PROBE.index(lib_end)]
    others = [p for p in (HERE.parent / "wasm" / "genes").glob("*.wat")
              if lib_start in p.read_text()]
    if not others:
        pytest.skip("no other gene carries the WAT library")
    other = others[0].read_text()
    assert other[other.index(lib_start):other.index(lib_end)] == probe
