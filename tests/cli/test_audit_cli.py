"""``rotifer agent audit verify | show`` through the real CLI in-process: a log that agrees
with the store passes; an edited, removed or swapped line, a store changed
behind the log's back, and a change logged but never committed are each found."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from .helpers import add_gene, init_project, ok, refused, run, wrap
from .test_memory_cli import MEMO, WRITES


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "proj")
    add_gene(root, "memo", MEMO, domain="memo")
    wrap(root, "memo")
    ok(root, "agent", "create", "bot", "--genes", "memo", "--memory-quota", "1MB")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    ok(root, "agent", "run", "bot", "--input", json.dumps(
        {"writes": [["memo/ctx", "changed", "CONTEXT"]], "deletes": ["memo/c2"]}))
    return root


def log(root: Path) -> Path:
    return root / ".rotifer" / "audit.jsonl"


def lines(root: Path) -> list[bytes]:
    return log(root).read_bytes().splitlines()


def put(root: Path, rows: list[bytes]) -> None:
    log(root).write_bytes(b"".join(r + b"\n" for r in rows))


def test_verify_passes_on_a_true_log(proj: Path) -> None:
    out = ok(proj, "agent", "audit", "verify", "bot")
    assert out.startswith("OK agent 'bot': ")
    assert "5 entries agree with the store" in out
    assert len(out.strip().splitlines()) == 1


def test_verify_reads_the_agents_own_lines_unless_full(proj: Path) -> None:
    own = ok(proj, "agent", "audit", "verify", "bot")
    assert "found by the history index" in own and "intact over" not in own
    whole = ok(proj, "agent", "audit", "verify", "bot", "--full")
    assert "hash chain intact over" in whole and "5 entries agree with the store" in whole


def test_an_edited_line_is_found(proj: Path) -> None:
    rows = lines(proj)
    rows[2] = rows[2].replace(b'"bytes":', b'"bytes":1')
    put(proj, rows)
    err = refused(proj, "AUDIT_MISMATCH", "agent", "audit", "verify", "bot")
    assert "audit.jsonl line 4: broken hash chain" in err


def test_a_removed_line_is_found(proj: Path) -> None:
    rows = lines(proj)
    del rows[3]
    put(proj, rows)
    err = refused(proj, "AUDIT_MISMATCH", "agent", "audit", "verify", "bot")
    assert "audit.jsonl line 4: broken hash chain" in err


def test_a_swapped_pair_is_found(proj: Path) -> None:
    rows = lines(proj)
    rows[1], rows[2] = rows[2], rows[1]
    put(proj, rows)
    err = refused(proj, "AUDIT_MISMATCH", "agent", "audit", "verify", "bot")
    assert "audit.jsonl line 2: broken hash chain" in err


def test_removing_the_first_lines_is_found(proj: Path) -> None:
    put(proj, lines(proj)[2:])
    err = refused(proj, "AUDIT_MISMATCH", "agent", "audit", "verify", "bot")
    assert "starts mid-chain" in err


def test_a_store_changed_behind_the_log_is_found(proj: Path) -> None:
    conn = sqlite3.connect(proj / ".rotifer" / "playground.db")
    with conn:
        conn.execute("UPDATE memory_entries SET category = 'CACHE' WHERE key = 'memo/pattern'")
    conn.close()
    err = refused(proj, "AUDIT_MISMATCH", "agent", "audit", "verify", "bot")
    assert "key 'memo/pattern': the log says PATTERN" in err


def _chained(previous: bytes, line: dict[str, object]) -> bytes:
    body = json.dumps(line, separators=(",", ":")).encode()
    return body[:-1] + b',"prev":"' + hashlib.sha256(previous).hexdigest().encode() + b'"}'


def test_a_change_logged_but_never_committed_gets_its_rolled_back_line(proj: Path) -> None:
    """What a writer killed between appending and committing leaves behind."""
    rows = lines(proj)
    seq = json.loads(rows[-1])["seq"] + 1
    phantom = {"ts": "2030-01-01T00:00:00.000000Z", "agent": "bot", "action": "write",
               "key": "ghost", "category": "CACHE", "actor": "v2:x", "bytes": 9,
               "entryId": None, "epoch": json.loads(rows[-1])["epoch"], "seq": seq}
    put(proj, [*rows, _chained(rows[-1], phantom)])
    out = ok(proj, "agent", "audit", "verify", "bot")
    assert "1 change logged but never committed now marked rolled_back" in out
    last = json.loads(lines(proj)[-1])
    assert (last["action"], last["seq"]) == ("rolled_back", seq)
    assert "never committed" not in ok(proj, "agent", "audit", "verify", "bot")
    history = ok(proj, "agent", "audit", "show", "bot", "--json")
    assert "ghost" not in history  # show never presents it as history


def test_a_log_from_an_older_rotifer_is_named_not_a_crash(proj: Path) -> None:
    old = []
    for row in lines(proj):
        line = json.loads(row)
        line.pop("prev")
        line.pop("seq", None)
        line.pop("epoch", None)
        old.append(json.dumps(line, separators=(",", ":")).encode())
    put(proj, old)
    # ... and a store as such a rotifer left it: no epoch, no anchor.
    with sqlite3.connect(proj / ".rotifer" / "playground.db") as conn:
        conn.execute("UPDATE memory_agents SET epoch = '', head = ''")
    out = ok(proj, "agent", "audit", "verify", "bot")
    assert "older lines without seq or chain" in out


def test_show_is_newest_first_filtered_and_never_shows_values(proj: Path) -> None:
    out = ok(proj, "agent", "audit", "show", "bot")
    rows = out.strip().splitlines()
    assert rows[0].split() == ["TS", "SEQ", "ACTION", "KEY", "CATEGORY", "BYTES", "ACTOR"]
    assert "delete" in rows[1] or "update" in rows[1]
    # a gene's id shortened as `agent memory list` shows a creator (issue 36)
    actor = json.loads(ok(proj, "agent", "audit", "show", "bot", "--limit", "1",
                          "--json"))["actor"]
    assert actor.startswith("v2:") and actor not in out
    assert f"{actor[:15]}… (" in rows[1]
    assert all(w[1] not in out for w in WRITES)
    keyed = [json.loads(x) for x in ok(proj, "agent", "audit", "show", "bot", "--key",
                                       "memo/ctx", "--json").splitlines()]
    assert [x["action"] for x in keyed] == ["update", "write"]
    assert keyed[0]["seq"] > keyed[1]["seq"]
    limited = ok(proj, "agent", "audit", "show", "bot", "--limit", "2", "--json").splitlines()
    assert len(limited) == 2
    assert ok(proj, "agent", "audit", "show", "bot", "--since",
              "2100-01-01T00:00:00Z").strip() == "No audit lines match"
    # a date alone (or date and minute) is UTC, as in the console's form (issue 36)
    assert ok(proj, "agent", "audit", "show", "bot", "--since",
              "2100-01-01").strip() == "No audit lines match"
    assert len(ok(proj, "agent", "audit", "show", "bot", "--since", "2000-01-01T00:00",
                  "--json").splitlines()) == len(ok(proj, "agent", "audit", "show", "bot",
                                                    "--json").splitlines())
    assert "2026-12-04" in refused(proj, "USAGE_ERROR", "agent", "audit", "show", "bot",
                                   "--since", "soon")
    refused(proj, "AGENT_NOT_FOUND", "agent", "audit", "show", "nobody")


def test_show_escapes_control_characters_in_keys(proj: Path) -> None:
    ok(proj, "agent", "run", "bot", "--input", json.dumps(
        {"writes": [["red\x1b[31m\rforged", "v", "CACHE"]]}))
    out = ok(proj, "agent", "audit", "show", "bot", "--limit", "1")
    assert "\x1b" not in out and "\r" not in out
    assert "red\\x1b[31m\\rforged" in out


def test_show_gives_a_deleted_agents_history(proj: Path) -> None:
    """Issue 36: `agent delete` keeps the agent's lines in the log; `audit show`
    shows them (with a hint that the agent is gone) instead of AGENT_NOT_FOUND."""
    before = [json.loads(x) for x in ok(proj, "agent", "audit", "show", "bot",
                                        "--json").splitlines()]
    ok(proj, "agent", "delete", "bot", "--yes")
    done = run(proj, "agent", "audit", "show", "bot", "--json")
    assert done.returncode == 0, done.stderr
    after = [json.loads(x) for x in done.stdout.splitlines()]
    assert "was deleted" in done.stderr
    assert after[0]["action"] == "drop_agent"
    assert [x["seq"] for x in after[-len(before):]] == [x["seq"] for x in before]
    assert min(x["seq"] for x in after) == 1
    refused(proj, "AGENT_NOT_FOUND", "agent", "audit", "show", "nobody")
