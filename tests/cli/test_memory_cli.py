"""``rotifer agent memory list | delete``: the deployer's view of an agent's
memory, through the real CLI in-process (what ``list`` imports is checked in a
process of its own).  ``list`` never prints a value; ``delete``
works whatever the entries' access policies say and is audited as the deployer."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import ManualClock, MemoryStore

from .helpers import add_gene, audit, clean_env, init_project, last_line, ok, refused, run, wrap

MEMO = '''
def express(input, ctx):
    out = {}
    for w in input.get("writes", []):
        ctx.memory.write_memory(w[0], w[1].encode(), w[2], w[3] if len(w) > 3 else None)
    for key in input.get("deletes", []):
        try:
            ctx.memory.delete_memory(key)
            out[key] = "deleted"
        except Exception as exc:
            out[key] = exc.code.value
    for key in input.get("reads", []):
        try:
            entry = ctx.memory.read_memory(key)
            out[key] = None if entry is None else len(entry.value)
        except Exception as exc:
            out[key] = exc.code.value
    return out
'''
#: A value that must never show up in what the CLI prints.
SECRET = "tOpSeCrEt-9d41f7c2-value-XyZ"
PRIVATE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
           "sharePolicy": "PRIVATE"}
WRITES = [
    ["memo/secret", SECRET, "PREFERENCE"],
    ["memo/pattern", "p" * 10, "PATTERN"],
    ["memo/ctx", "context", "CONTEXT"],
    ["memo/c1", "c" * 30, "CACHE"],
    ["memo/c2", "cc", "CACHE"],
    ["memo/private", "mine", "PREFERENCE", PRIVATE],
]
SIZES = {w[0]: len(w[0]) + len(w[1]) for w in WRITES}
USED = sum(SIZES.values())


def encodings(text: str) -> list[str]:
    raw = text.encode()
    forms = [text, raw.hex(), base64.b64encode(raw).decode(),
             base64.urlsafe_b64encode(raw).decode()]
    return forms + [f.rstrip("=") for f in forms]


def assert_no_secret(*outputs: str) -> None:
    for out in outputs:
        for form in encodings(SECRET):
            assert form not in out


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """Agent ``bot`` (gene ``memo``, quota 1 MB) with the six entries of WRITES."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "memo", MEMO, domain="memo")
    wrap(root, "memo")
    ok(root, "agent", "create", "bot", "--genes", "memo", "--memory-quota", "1MB")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    return root


def gene_id(root: Path) -> str:
    return str(json.loads(ok(root, "agent", "memory", "list", "bot", "--json"))["entries"][0][
        "createdBy"])


def memory_json(root: Path, *extra: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ok(root, "agent", "memory", "list", "bot", "--json",
                                        *extra))
    return doc


# -- list -------------------------------------------------------------------------------------


def test_list_shows_key_category_size_creator_update_and_usage(proj: Path) -> None:
    done = run(proj, "agent", "memory", "list", "bot")
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["KEY", "CATEGORY", "SIZE", "CREATED", "BY", "UPDATED"]
    doc = memory_json(proj)
    creator = doc["entries"][0]["createdBy"]
    updated = {e["key"]: e["updatedAt"] for e in doc["entries"]}
    category = {w[0]: w[2] for w in WRITES}
    rows = [line.split() for line in lines[1:-1]]
    assert [r[0] for r in rows] == sorted(SIZES)
    for key, cat, size, short, name, when in rows:
        assert (cat, int(size), when) == (category[key], SIZES[key], updated[key])
        assert creator.startswith(short.rstrip("…")) and short.startswith("v2:")
        assert name == "(memo)"
    assert lines[-1] == f"Usage: {USED} B of 1 MB (0.0%), 6 entries"
    assert_no_secret(done.stdout, done.stderr)


def test_list_json_has_no_values(proj: Path) -> None:
    done = run(proj, "agent", "memory", "list", "bot", "--json")
    assert done.returncode == 0
    doc = json.loads(done.stdout)
    assert (doc["agent"], doc["usedBytes"], doc["quotaBytes"]) == ("bot", USED, 1024 * 1024)
    entries = doc["entries"]
    assert [e["key"] for e in entries] == sorted(SIZES)
    for e in entries:
        assert "value" not in e
        assert e["size"] == SIZES[e["key"]]
        assert set(e) >= {"entryId", "category", "key", "createdBy", "lastAccessedBy",
                          "createdAt", "updatedAt", "accessPolicy", "retentionPolicy", "size"}
        assert e["createdBy"] == e["lastAccessedBy"] and e["createdBy"].startswith("v2:")
    private = next(e for e in entries if e["key"] == "memo/private")
    assert private["accessPolicy"] == PRIVATE
    assert_no_secret(done.stdout, done.stderr)


def test_list_by_category(proj: Path) -> None:
    out = ok(proj, "agent", "memory", "list", "bot", "--category", "CACHE")
    keys = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert keys == ["memo/c1", "memo/c2"]
    assert out.splitlines()[-1] == f"Usage: {USED} B of 1 MB (0.0%), 2 entries in CACHE"
    doc = memory_json(proj, "--category", "PREFERENCE")
    assert [e["key"] for e in doc["entries"]] == ["memo/private", "memo/secret"]
    assert doc["usedBytes"] == USED  # the usage is the whole agent's
    for category in ["PATTERN", "CONTEXT"]:
        assert len(memory_json(proj, "--category", category)["entries"]) == 1
    out = ok(proj, "agent", "memory", "delete", "bot", "--category", "CONTEXT")
    assert "No entries in CONTEXT" in ok(proj, "agent", "memory", "list", "bot",
                                         "--category", "CONTEXT")
    assert_no_secret(out)


def test_list_changes_nothing(proj: Path) -> None:
    before, lines = memory_json(proj), len(audit(proj))
    ok(proj, "agent", "memory", "list", "bot")
    ok(proj, "agent", "memory", "list", "bot", "--category", "CACHE")
    assert memory_json(proj) == before and len(audit(proj)) == lines


def test_list_an_empty_memory(proj: Path) -> None:
    ok(proj, "agent", "create", "empty", "--genes", "memo")
    out = ok(proj, "agent", "memory", "list", "empty")
    assert out.splitlines() == ["No entries", "Usage: 0 B of 10 MB (0.0%), 0 entries"]
    doc = json.loads(ok(proj, "agent", "memory", "list", "empty", "--json"))
    assert doc == {"agent": "empty", "usedBytes": 0, "quotaBytes": 10 * 1024 * 1024,
                   "entries": []}


def test_list_in_pages(proj: Path) -> None:
    """--limit N lists a page of N keys in key order and says how to get the
    next; --after KEY continues after KEY; the pages join up to the whole list."""
    whole = [e["key"] for e in memory_json(proj)["entries"]]
    assert whole == sorted(whole)
    paged: list[str] = []
    after: list[str] = []
    while True:
        doc = memory_json(proj, "--limit", "4", *after)
        paged += [e["key"] for e in doc["entries"]]
        if doc["nextAfter"] is None:
            break
        assert doc["nextAfter"] == paged[-1] and len(doc["entries"]) == 4
        after = ["--after", doc["nextAfter"]]
    assert paged == whole
    out = ok(proj, "agent", "memory", "list", "bot", "--limit", "2").splitlines()
    assert [line.split()[0] for line in out[1:3]] == whole[:2]
    assert out[-2].endswith("2 entries listed")
    assert out[-1] == f"More: rotifer agent memory list bot --limit 2 --after {whole[1]}"
    out = ok(proj, "agent", "memory", "list", "bot", "--category", "CACHE", "--limit", "1",
             "--after", "memo/c1").splitlines()
    assert [line.split()[0] for line in out[1:-1]] == ["memo/c2"]  # the last: no More line
    refused(proj, "USAGE_ERROR", "agent", "memory", "list", "bot", "--limit", "0")
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "memory", "list", "bot", "--after", "")


def test_list_refusals(proj: Path) -> None:
    for bad in ["FOO", "", "PREFERENCES"]:
        err = refused(proj, "MEMORY_INVALID_INPUT", "agent", "memory", "list", "bot",
                      "--category", bad)
        assert "category" in last_line(err)
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "memory", "list", "bot", "--json",
            "--category", "FOO")
    refused(proj, "AGENT_NOT_FOUND", "agent", "memory", "list", "nobody")
    refused(proj, "USAGE_ERROR", "agent", "memory", "list")
    refused(proj, "USAGE_ERROR", "agent", "memory", "list", "bot", "--category")
    (proj / ".rotifer" / "playground.db").unlink()  # the memory is gone, the spec is not
    refused(proj, "MEMORY_STORAGE_ERROR", "agent", "memory", "list", "bot")
    refused(proj, "MEMORY_STORAGE_ERROR", "agent", "memory", "delete", "bot", "--key", "k")


def test_list_purges_expired_entries(proj: Path, tmp_path: Path) -> None:
    """Entries written three days ago (through the Python API with a clock set
    back) with a one-day retention: the next list removes them, with audit lines.
    (Into agents with no later change: an agent's times never run backwards.)"""
    policy = tmp_path / "policy.json"
    policy.write_text('{"maxRetentionDays": 2, "anonymizationSupported": false}')
    ok(proj, "agent", "create", "short", "--genes", "memo", "--data-policy", str(policy))
    ok(proj, "agent", "create", "aged", "--genes", "memo", "--memory-quota", "1MB")
    v2 = gene_id(proj)
    days = 86_400 * 1_000_000
    clock = ManualClock(int(time.time() * 1_000_000) - 3 * days)
    one_day = {"maxRetentionDays": 1, "autoDeleteOnTermination": False,
               "anonymizationSupported": False}
    ten_days = {**one_day, "maxRetentionDays": 10}
    with MemoryStore.open(proj / ".rotifer", clock=clock) as store:
        memory = store.for_gene("aged", v2, "memo")
        memory.write_memory("memo/old", b"gone", "CACHE", retention_policy=one_day)
        memory.write_memory("memo/kept", b"here", "PATTERN", retention_policy=ten_days)
        store.for_gene("short", v2, "memo").write_memory("memo/by-policy", b"x", "CONTEXT",
                                                         retention_policy=None)
    lines = len(audit(proj))
    out = ok(proj, "agent", "memory", "list", "aged")
    keys = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert "memo/old" not in keys and "memo/kept" in keys
    assert out.splitlines()[-1].startswith(f"Usage: {len('memo/kept') + 4} B of 1 MB")
    expired = [line for line in audit(proj)[lines:] if line["action"] == "expire"]
    assert [(e["agent"], e["key"], e["category"]) for e in expired] == [
        ("aged", "memo/old", "CACHE")]
    aged = json.loads(ok(proj, "agent", "memory", "list", "aged", "--json"))
    assert aged["usedBytes"] == len("memo/kept") + 4
    # the agent's data policy (2 days) expires an entry that follows it
    out = ok(proj, "agent", "memory", "list", "short", "--json")
    assert json.loads(out)["entries"] == []
    assert [line["key"] for line in audit(proj) if line["action"] == "expire"] == [
        "memo/old", "memo/by-policy"]


# -- delete -----------------------------------------------------------------------------------


def test_delete_a_key(proj: Path) -> None:
    lines = len(audit(proj))
    done = run(proj, "agent", "memory", "delete", "bot", "--key", "memo/secret")
    assert done.returncode == 0 and done.stdout == "Removed 1 entry\n"
    assert_no_secret(done.stdout, done.stderr)
    assert "memo/secret" not in [e["key"] for e in memory_json(proj)["entries"]]
    assert memory_json(proj)["usedBytes"] == USED - SIZES["memo/secret"]
    new = audit(proj)[lines:]
    assert len(new) == 1
    line = new[0]
    assert (line["agent"], line["key"], line["category"], line["actor"], line["bytes"]) == (
        "bot", "memo/secret", "PREFERENCE", "deployer", SIZES["memo/secret"])
    assert "delete" in line["action"]
    assert_no_secret(json.dumps(new))


def test_delete_a_category(proj: Path) -> None:
    lines = len(audit(proj))
    assert ok(proj, "agent", "memory", "delete", "bot", "--category", "CACHE") == (
        "Removed 2 entries\n")
    new = audit(proj)[lines:]
    assert sorted(line["key"] for line in new) == ["memo/c1", "memo/c2"]
    assert {line["actor"] for line in new} == {"deployer"}
    assert [e["category"] for e in memory_json(proj)["entries"]].count("CACHE") == 0
    assert ok(proj, "agent", "memory", "delete", "bot", "--category", "CACHE") == (
        "Removed 0 entries\n")
    assert len(audit(proj)) == lines + 2
    assert ok(proj, "agent", "memory", "delete", "bot", "--category", "PREFERENCE") == (
        "Removed 2 entries\n")  # the CREATOR_GENE_ONLY one too


def test_delete_what_an_upgraded_gene_cannot_reach(proj: Path) -> None:
    """The seed's upgrade case: entries the old version wrote with CREATOR_GENE_ONLY."""
    old = gene_id(proj)
    (proj / "genes" / "memo" / "gene.py").write_text(MEMO + "# version 2\n")
    new = wrap(proj, "memo")
    assert new != old
    probe = {"reads": ["memo/private", "memo/ctx"], "deletes": ["memo/private"]}
    out = json.loads(ok(proj, "agent", "run", "bot", "--input", json.dumps(probe)))
    assert out == {"memo/private": "MEMORY_ACCESS_DENIED", "memo/ctx": len("context")}
    lines = len(audit(proj))
    assert ok(proj, "agent", "memory", "delete", "bot", "--key", "memo/private") == (
        "Removed 1 entry\n")
    line = audit(proj)[lines]
    assert (line["key"], line["actor"], line.get("createdBy")) == ("memo/private", "deployer",
                                                                    old)
    out = json.loads(ok(proj, "agent", "run", "bot", "--input", '{"reads": ["memo/private"]}'))
    assert out == {"memo/private": None}


def test_delete_refusals_remove_nothing(proj: Path) -> None:
    before, lines = memory_json(proj), len(audit(proj))
    err = refused(proj, "MEMORY_NOT_FOUND", "agent", "memory", "delete", "bot", "--key",
                  "memo/never")
    assert "memo/never" in last_line(err)
    refused(proj, "MEMORY_NOT_FOUND", "agent", "memory", "delete", "bot", "--key", "memo/c1 ")
    refused(proj, "USAGE_ERROR", "agent", "memory", "delete", "bot")
    refused(proj, "USAGE_ERROR", "agent", "memory", "delete", "bot", "--key", "memo/c1",
            "--category", "CACHE")
    refused(proj, "USAGE_ERROR", "agent", "memory", "delete", "bot", "--key")
    refused(proj, "USAGE_ERROR", "agent", "memory", "delete", "--key", "memo/c1")
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "memory", "delete", "bot", "--category",
            "FOO")
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "memory", "delete", "bot", "--key", "")
    refused(proj, "AGENT_NOT_FOUND", "agent", "memory", "delete", "nobody", "--key", "memo/c1")
    assert memory_json(proj) == before
    assert not [line for line in audit(proj)[lines:] if line["actor"] == "deployer"]


def test_list_loads_no_gene_transfer_or_wasm_code(proj: Path) -> None:
    """`agent memory list` must start fast: it imports the store and the CLI, not
    the gene loader, the transfer code or wasmtime (the bench measures the time)."""
    code = ("import sys; from rotifer.cli.main import main\n"
            "try:\n    main(['agent', 'memory', 'list', 'bot'])\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "heavy = sorted(m for m in sys.modules if m.startswith(('rotifer.genes.gene',"
            " 'rotifer.genes.wasm', 'rotifer.genes.node', 'rotifer.memory.transfer',"
            " 'wasmtime', 'psycopg')))\n"
            "print('loaded:', heavy)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=proj, env=clean_env(),
                          capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "No entries" in done.stdout or "KEY" in done.stdout, done.stdout
    assert done.stdout.strip().splitlines()[-1] == "loaded: []", done.stdout
