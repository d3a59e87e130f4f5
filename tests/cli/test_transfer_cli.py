"""``rotifer agent move | export | import`` through the real CLI in-process, on real
SQLite files and the real PostgreSQL server of tests/pg_plugin.py.

The memory layer's guarantees are tested in tests/memory/test_transfer.py;
here: the commands pick the right stores, record the binding, print what
happened, and turn every refusal into ``CODE: message`` on stderr with a
non-zero exit status.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import Category, MemoryStore

from .helpers import audit, copy_spec, init_project, ok, refused, store_agents

PG = pytest.mark.postgres

GENE = '''
def express(input, ctx):
    for key, value, category in input.get("writes", []):
        ctx.memory.write_memory(key, value.encode(), category)
    read = {}
    for key in input.get("reads", []):
        entry = ctx.memory.read_memory(key)
        read[key] = None if entry is None else entry.value.decode()
    return {"read": read}
'''
PHENOTYPE = {"name": "memo", "domain": "memo", "version": "1.0.0", "fidelity": "Wrapped",
             "inputSchema": {}, "outputSchema": {}}
WRITES = [["memo/pref", "tabs", "PREFERENCE"], ["memo/pattern", "p" * 10, "PATTERN"],
          ["memo/context", "ctx", "CONTEXT"], ["memo/cache", "c" * 50, "CACHE"]]
KEYS = [w[0] for w in WRITES]


def make_project(root: Path) -> Path:
    init_project(root)
    gene = root / "genes" / "memo"
    gene.mkdir(parents=True)
    (gene / "phenotype.json").write_text(json.dumps(PHENOTYPE))
    (gene / "gene.py").write_text(GENE)
    ok(root, "wrap", "memo")
    return root


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """A project with agent ``bot`` whose memory holds one entry per category."""
    root = make_project(tmp_path / "proj")
    ok(root, "agent", "create", "bot", "--genes", "memo", "--memory-quota", "4KB")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    return root


def reads(root: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = ok(root, "agent", "run", "bot", "--input", json.dumps({"reads": KEYS}), env=env)
    result: dict[str, Any] = json.loads(out)["read"]
    return result


def spec(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / ".rotifer" / "agents" / "bot.json").read_text())
    return data


def entries(root: Path, url: str | None = None) -> dict[str, tuple[str, str, str]]:
    """key -> (category, createdBy, createdAt), read straight from the store."""
    with MemoryStore.open(root / ".rotifer", url) as store:
        if not store.has_agent("bot"):
            return {}
        return {e.key: (e.category.value, e.created_by, e.created_at)
                for e in store.deployer("bot").list()}


ALL = {"memo/pref": "tabs", "memo/pattern": "p" * 10, "memo/context": "ctx",
       "memo/cache": "c" * 50}
NO_CACHE = {**ALL, "memo/cache": None}


@PG
def test_move_to_postgres_and_back(proj: Path, pg_fresh_url: str) -> None:
    before = entries(proj)
    out = ok(proj, "agent", "move", "bot", "--to", pg_fresh_url)
    assert "Moved agent 'bot': 3 entries" in out and "1 CACHE entry (" in out
    assert "postgresql:" in out
    assert spec(proj)["memoryUrl"] == pg_fresh_url
    assert entries(proj) == {}  # gone from the project's SQLite file
    moved = entries(proj, pg_fresh_url)
    assert moved == {k: v for k, v in before.items() if v[0] != Category.CACHE.value}
    assert reads(proj) == NO_CACHE  # the agent now runs against PostgreSQL
    actions = [line["action"] for line in audit(proj)]
    assert actions.count("move") == 1 and actions.count("move_out") == 3
    assert actions.count("move_drop") == 1 and actions.count("import_agent") == 1

    back = f"sqlite:{proj / '.rotifer' / 'playground.db'}"
    ok(proj, "agent", "move", "bot", "--to", back)
    assert spec(proj).get("memoryUrl") is None  # the project's own store: no binding
    assert entries(proj, pg_fresh_url) == {}
    assert entries(proj) == moved
    assert reads(proj) == NO_CACHE


@PG
def test_move_keep_cache_and_relative_sqlite_paths(proj: Path, pg_fresh_url: str
                                                   ) -> None:
    ok(proj, "agent", "move", "bot", "--to", pg_fresh_url, "--keep-cache")
    assert reads(proj) == ALL
    ok(proj, "agent", "move", "bot", "--to", "sqlite:elsewhere.db", "--keep-cache")
    assert spec(proj)["memoryUrl"] == f"sqlite:{(proj / 'elsewhere.db').resolve()}"
    sub = proj / "genes"
    assert reads(sub) == ALL  # the binding does not depend on the working folder


def test_export_then_import_into_another_project(proj: Path, tmp_path: Path) -> None:
    before = entries(proj)
    out = ok(proj, "agent", "export", "bot", "bot.json")
    assert "Exported agent 'bot': 3 entries" in out and "Checksum (sha256): " in out
    assert entries(proj) == before  # an export is a copy
    assert [line["action"] for line in audit(proj)][-1] == "export"

    other = make_project(tmp_path / "other")
    # the spec travels in the file (issue 36): no copying by hand
    out = ok(other, "agent", "import", str(proj / "bot.json"))
    assert "Imported agent 'bot': 3 entries" in out
    spec = json.loads((other / ".rotifer" / "agents" / "bot.json").read_text())
    assert spec["genes"] == ["memo"] and spec["memoryUrl"] is None
    assert entries(other) == {k: v for k, v in before.items() if v[0] != "CACHE"}
    assert reads(other) == NO_CACHE
    # the history travelled too (issue 36): it starts at seq 1, then the import
    history = [json.loads(x) for x in ok(other, "agent", "audit", "show", "bot",
                                         "--json").splitlines()]
    source = [json.loads(x) for x in ok(proj, "agent", "audit", "show", "bot",
                                        "--json").splitlines()]
    assert min(x["seq"] for x in history if "seq" in x) == 1
    assert [x["seq"] for x in history if x["action"] == "write"] == \
        [x["seq"] for x in source if x["action"] == "write"]
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")
    assert [line["action"] for line in audit(other) if line["action"] != "write"][:4] == [
        "import_agent", "import", "import", "import"]
    # Importing again would merge: refused, nothing changed.
    refused(other, "MEMORY_INVALID_INPUT", "agent", "import", str(proj / "bot.json"))
    assert reads(other) == NO_CACHE


def test_export_keep_cache(proj: Path, tmp_path: Path) -> None:
    ok(proj, "agent", "export", "bot", str(tmp_path / "all.json"), "--keep-cache")
    data = json.loads((tmp_path / "all.json").read_text())
    assert data["counts"] == {"PREFERENCE": 1, "PATTERN": 1, "CONTEXT": 1, "CACHE": 1}


def test_import_refuses_a_damaged_file(proj: Path, tmp_path: Path) -> None:
    ok(proj, "agent", "export", "bot", "bot.json")
    other = make_project(tmp_path / "other")
    copy_spec(proj, other)
    data = json.loads((proj / "bot.json").read_text())
    data["entries"][0]["entry"]["value"] = "dGFtcGVyZWQ="
    (tmp_path / "bad.json").write_text(json.dumps(data))
    err = refused(other, "MEMORY_INVALID_INPUT", "agent", "import", str(tmp_path / "bad.json"))
    assert "checksum" in err
    (tmp_path / "junk.json").write_text("not json")
    refused(other, "MEMORY_INVALID_INPUT", "agent", "import", str(tmp_path / "junk.json"))
    refused(other, "MEMORY_INVALID_INPUT", "agent", "import", str(tmp_path / "missing.json"))
    assert entries(other) == {}


def test_refusals_change_nothing(proj: Path, tmp_path: Path) -> None:
    before = entries(proj)
    dest = f"sqlite:{tmp_path / 'dest.db'}"
    refused(proj, "AGENT_NOT_FOUND", "agent", "move", "nobody", "--to", dest)
    refused(proj, "AGENT_NOT_FOUND", "agent", "export", "nobody", "x.json")
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "move", "bot", "--to", dest,
            env={"ROTIFER_MEMORY_URL": dest})
    refused(proj, "MEMORY_QUOTA_EXCEEDED", "agent", "move", "bot", "--to", dest,
            "--memory-quota", "0.04KB")  # 40 bytes; the carried entries need 50
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "move", "bot", "--to", dest,
            "--memory-quota", "lots")
    refused(proj, "MEMORY_STORAGE_ERROR", "agent", "move", "bot", "--to", "mysql://x/y")
    # The destination already holds a memory for bot: an import or move never merges.
    with MemoryStore.open(tmp_path / "dest-rot", dest) as store:
        store.create_agent("bot")
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "move", "bot", "--to", dest)
    assert entries(proj) == before and spec(proj).get("memoryUrl") is None
    assert not any(line["action"] in ("move", "import_agent") for line in audit(proj))
    assert reads(proj) == ALL


def test_move_with_a_new_quota(proj: Path, tmp_path: Path) -> None:
    dest = f"sqlite:{tmp_path / 'dest.db'}"
    ok(proj, "agent", "move", "bot", "--to", dest, "--memory-quota", "1KB")
    with MemoryStore.open(tmp_path / "dest-rot", dest) as store:
        assert store.usage("bot")[1] == 1024


def history(root: Path) -> list[int]:
    """The change numbers ``audit show`` lists, oldest first, each once."""
    shown = [json.loads(x) for x in ok(root, "agent", "audit", "show", "bot", "--json")
             .splitlines()]
    seqs = [x["seq"] for x in reversed(shown) if x.get("seq") is not None]
    return [s for i, s in enumerate(seqs) if i == 0 or seqs[i - 1] != s]


def test_audit_verify_and_show_after_a_move(proj: Path, tmp_path: Path) -> None:
    """Issue 22 item 1 as reported: ``agent move`` broke ``audit verify`` for good
    (``change 3 follows change 4``) and ``show`` lost the history before the move."""
    ok(proj, "agent", "audit", "verify", "bot")
    ok(proj, "agent", "move", "bot", "--to", f"sqlite:{tmp_path / 'other.db'}", "-q")
    out = ok(proj, "agent", "audit", "verify", "bot")
    assert "never committed" not in out
    assert history(proj) == [1, 2, 3, 4, 5, 6]  # the run's 4 writes, the move, the import
    reads(proj)
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES[:1]}))
    assert "never committed" not in ok(proj, "agent", "audit", "verify", "bot")
    assert history(proj) == [1, 2, 3, 4, 5, 6, 7]
    assert not [x for x in audit(proj) if x["action"] == "rolled_back"]


@PG
def test_audit_after_a_move_to_postgres_and_an_import_beside_it(
        proj: Path, tmp_path: Path, pg_fresh_url: str) -> None:
    """Item 2 as reported: after SQLite -> PostgreSQL, ``verify`` marked the committed
    pre-move changes rolled_back; an export imported into a second store of the same
    project made ``verify`` of the first append a false line."""
    ok(proj, "agent", "move", "bot", "--to", pg_fresh_url, "-q")
    out = ok(proj, "agent", "audit", "verify", "bot")
    assert "never committed" not in out and history(proj)[0] == 1
    ok(proj, "agent", "export", "bot", str(tmp_path / "bot.json"), "-q")
    second = f"sqlite:{tmp_path / 'second.db'}"
    ok(proj, "agent", "import", str(tmp_path / "bot.json"), "-q",
       env={"ROTIFER_MEMORY_URL": second})
    for env in (None, {"ROTIFER_MEMORY_URL": second}):
        out = ok(proj, "agent", "audit", "verify", "bot", env=env)
        assert "never committed" not in out, out
    assert not [x for x in audit(proj) if x["action"] == "rolled_back"]


def test_import_makes_the_agent_only_with_the_same_genes(proj: Path, tmp_path: Path) -> None:
    """The carried spec's genes are checked by id: a missing gene, or one of that
    name with other code, is refused and leaves no spec and no memory; an
    export without a spec (an older rotifer's) still needs the spec copied."""
    ok(proj, "agent", "export", "bot", "bot.json")
    data = json.loads((proj / "bot.json").read_text())
    assert data["spec"]["geneIds"]["memo"].startswith("v2:")
    assert "memoryUrl" not in data["spec"]

    bare = tmp_path / "bare"
    init_project(bare)
    err = refused(bare, "GENE_NOT_FOUND", "agent", "import", str(proj / "bot.json"))
    assert "copy genes/memo" in err
    assert not (bare / ".rotifer" / "agents" / "bot.json").exists()

    changed = make_project(tmp_path / "changed")
    (changed / "genes" / "memo" / "gene.py").write_text(GENE + "\n# other code\n")
    ok(changed, "wrap", "memo")
    err = refused(changed, "INVALID_GENE", "agent", "import", str(proj / "bot.json"))
    assert "not the one agent 'bot' was exported with" in err
    assert not (changed / ".rotifer" / "agents" / "bot.json").exists()
    assert store_agents(changed) == []

    old = make_project(tmp_path / "old")
    del data["spec"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    refused(old, "AGENT_NOT_FOUND", "agent", "import", str(tmp_path / "old.json"))
    copy_spec(proj, old)
    ok(old, "agent", "import", str(tmp_path / "old.json"))
