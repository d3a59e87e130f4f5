"""``rotifer agent create | list | run | update-genes`` through the real CLI in-process:
the seed's formatter that remembers the indent, quotas and data policies, and
every refusal leaving no agent behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rotifer.memory import DataPolicy, MemoryStore
from tests.genes.helpers import BETTER_FORMATTER, FORMATTER

from .helpers import (
    add_gene,
    add_wat_gene,
    agent_list,
    assert_not_created,
    audit,
    init_project,
    last_line,
    ok,
    refused,
    run,
    spec_path,
    store_agents,
    wrap,
)

MB = 1024 * 1024

#: Writes one entry with the share policy and retention given in the input.
POLICY_PROBE = '''
def express(input, ctx):
    access = {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN",
              "sharePolicy": input["share"]}
    retention = {"maxRetentionDays": input["days"], "autoDeleteOnTermination": False,
                 "anonymizationSupported": True}
    try:
        ctx.memory.write_memory("probe/" + input["key"], b"v", "CONTEXT", access, retention)
        return "ok"
    except Exception as exc:
        return exc.code.value
'''


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """A project with the wrapped formatter ``fmt`` and two plain genes ``up``, ``ex``
    (wrapped too: an agent is made of wrapped genes)."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "fmt", FORMATTER)
    add_gene(root, "up", "def express(input, ctx):\n    return str(input).upper()\n",
             domain="text")
    add_gene(root, "ex", "def express(input, ctx):\n    return input + '!'\n", domain="text")
    for name in ("fmt", "up", "ex"):
        wrap(root, name)
    return root


def listed(root: Path) -> dict[str, dict[str, object]]:
    return {a["name"]: a for a in agent_list(root)}


def quota_of(root: Path, name: str) -> int:
    with MemoryStore.open(root / ".rotifer") as store:
        return store.usage(name)[1]


# -- create -----------------------------------------------------------------------------------


def test_create_with_the_defaults(proj: Path) -> None:
    out = ok(proj, "agent", "create", "a", "--genes", "fmt")
    assert out.strip() == "Created agent 'a': genes fmt (seq), memory quota 10 MB"
    a = listed(proj)["a"]
    assert (a["genes"], a["composition"], a["usedBytes"], a["quotaBytes"]) == (
        ["fmt"], "seq", 0, 10 * MB)
    assert json.loads(spec_path(proj, "a").read_text())["genes"] == ["fmt"]
    assert store_agents(proj) == ["a"]
    with MemoryStore.open(proj / ".rotifer") as store:
        assert store.agent_record("a").data_policy == DataPolicy(None, False)


def test_create_gene_lists_and_compositions(proj: Path) -> None:
    ok(proj, "agent", "create", "comma", "--genes", "up,ex")
    ok(proj, "agent", "create", "repeated", "--genes", "up", "--genes", "ex")
    ok(proj, "agent", "create", "mixed", "--genes", "up, ex", "--genes", "fmt")
    ok(proj, "agent", "create", "par", "--genes", "up,ex", "--composition", "par")
    ok(proj, "agent", "create", "cond", "--genes", "up,ex,up", "--composition", "cond")
    ok(proj, "agent", "create", "try", "--genes", "up,ex", "--composition", "try")
    agents = listed(proj)
    assert agents["comma"]["genes"] == agents["repeated"]["genes"] == ["up", "ex"]
    assert agents["mixed"]["genes"] == ["up", "ex", "fmt"]
    assert {n: a["composition"] for n, a in agents.items()} == {
        "comma": "seq", "repeated": "seq", "mixed": "seq", "par": "par", "cond": "cond",
        "try": "try"}
    assert json.loads(ok(proj, "agent", "run", "comma", "--input", '"hi"')) == "HI!"
    assert json.loads(ok(proj, "agent", "run", "par", "--input", '"hi"')) == ["HI", "hi!"]
    assert json.loads(ok(proj, "agent", "run", "try", "--input", '"hi"')) == "HI"


QUOTAS = [("512KB", 512 * 1024, "512 KB"), ("1.5gb", 1536 * MB, "1.5 GB"),
          ("50MB", 50 * MB, "50 MB"), ("2mb", 2 * MB, "2 MB"), ("0.5KB", 512, "512 B"),
          ("1024GB", 1024 * 1024 * MB, "1024 GB")]
BAD_QUOTAS = ["100", "0MB", "-5MB", "2000GB", "1025GB", "abc", "", "MB", "5TB", "5 M B",
              "0.0001KB", "1e3KB", "nanMB", "infGB", "0x10KB", "5MB5"]


def test_create_with_a_quota(proj: Path) -> None:
    for i, (size, expected, shown) in enumerate(QUOTAS):
        out = ok(proj, "agent", "create", f"q{i}", "--genes", "fmt", f"--memory-quota={size}")
        assert out.strip().endswith(f"memory quota {shown}"), (size, out)
        assert quota_of(proj, f"q{i}") == expected, size
    assert [a["quotaBytes"] for a in agent_list(proj)] == [q[1] for q in QUOTAS]


def test_create_refuses_a_bad_quota(proj: Path) -> None:
    for size in BAD_QUOTAS:
        err = refused(proj, "MEMORY_INVALID_INPUT", "agent", "create", "q", "--genes", "fmt",
                      f"--memory-quota={size}")
        assert "memory quota" in last_line(err), size
        assert_not_created(proj, "q", listing=False)
    assert_not_created(proj, "q")


def test_create_refuses_a_bad_quota_given_as_a_separate_argument(proj: Path) -> None:
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "create", "q", "--genes", "fmt",
            "--memory-quota", "-5MB")
    refused(proj, "USAGE_ERROR", "agent", "create", "q", "--genes", "fmt", "--memory-quota")
    assert_not_created(proj, "q")


def test_create_with_a_data_policy(proj: Path, tmp_path: Path) -> None:
    add_gene(proj, "probe", POLICY_PROBE)
    wrap(proj, "probe")
    policy = tmp_path / "policy.json"
    policy.write_text('{"maxRetentionDays": 30, "anonymizationSupported": true}')
    ok(proj, "agent", "create", "p", "--genes", "probe", "--data-policy", str(policy))
    ok(proj, "agent", "create", "plain", "--genes", "probe")
    with MemoryStore.open(proj / ".rotifer") as store:
        assert store.agent_record("p").data_policy == DataPolicy(30, True)

    def probe(agent: str, share: str, days: int | None, key: str) -> str:
        inp = json.dumps({"share": share, "days": days, "key": key})
        return str(json.loads(ok(proj, "agent", "run", agent, "--input", inp)))

    assert probe("p", "ANONYMIZED_SHARE", 30, "a") == "ok"
    assert probe("p", "KNOWLEDGE_GENE", 7, "b") == "ok"
    assert probe("p", "PRIVATE", 31, "c") == "MEMORY_ACCESS_DENIED"  # longer than the policy
    assert probe("p", "PRIVATE", None, "d") == "MEMORY_ACCESS_DENIED"  # no limit: longer too
    assert probe("plain", "ANONYMIZED_SHARE", 30, "a") == "MEMORY_ACCESS_DENIED"
    assert probe("plain", "PRIVATE", None, "a") == "ok"
    ok(proj, "agent", "create", "nolimit", "--genes", "probe", "--data-policy", str(
        _write(tmp_path / "p2.json", '{"maxRetentionDays": null, "anonymizationSupported": false}')))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


BAD_POLICIES = [
    None,  # no such file
    "not json",
    "",
    "[]",
    "null",
    '{"maxRetentionDays": 3}',
    '{"anonymizationSupported": true}',
    '{"maxRetentionDays": 3, "anonymizationSupported": true, "extra": 1}',
    '{"maxRetentionDays": 0, "anonymizationSupported": false}',
    '{"maxRetentionDays": 2147483648, "anonymizationSupported": false}',
    '{"maxRetentionDays": 1.5, "anonymizationSupported": false}',
    '{"maxRetentionDays": "3", "anonymizationSupported": false}',
    '{"maxRetentionDays": true, "anonymizationSupported": false}',
    '{"maxRetentionDays": 3, "anonymizationSupported": "yes"}',
    '{"maxretentiondays": 3, "anonymizationSupported": false}',
]


def test_create_refuses_a_bad_data_policy(proj: Path, tmp_path: Path) -> None:
    for i, text in enumerate(BAD_POLICIES):
        path = tmp_path / f"policy{i}.json"
        if text is not None:
            path.write_text(text)
        err = refused(proj, "MEMORY_INVALID_INPUT", "agent", "create", "p", "--genes", "fmt",
                      "--data-policy", str(path))
        assert "data policy" in last_line(err), text
        assert_not_created(proj, "p", listing=False)
    refused(proj, "USAGE_ERROR", "agent", "create", "p", "--genes", "fmt",
            "--data-policy", str(tmp_path))  # a folder
    assert_not_created(proj, "p")


@pytest.mark.parametrize("text", [
    '{"maxRetentionDays": 3, "anonymizationSupported": false, "maxRetentionDays": null}',
    '{"maxRetentionDays": 3, "anonymizationSupported": true, "anonymizationSupported": false}',
    '{"maxRetentionDays": NaN, "anonymizationSupported": false}',
])
def test_create_refuses_an_ambiguous_data_policy_file(proj: Path, tmp_path: Path,
                                                      text: str) -> None:
    """A field given twice (json.loads would keep the last, silently; WASM requests
    refuse it the same way) or a number JSON does not have: a clear one-line refusal."""
    path = tmp_path / "policy.json"
    path.write_text(text)
    line = last_line(refused(proj, "MEMORY_INVALID_INPUT", "agent", "create", "p", "--genes",
                             "fmt", "--data-policy", str(path)))
    assert str(path) in line, line
    assert ("twice" in line) if "NaN" not in text else ("NaN" in line), line
    assert_not_created(proj, "p")


def test_create_refusals_create_nothing(proj: Path) -> None:
    refused(proj, "GENE_NOT_FOUND", "agent", "create", "a", "--genes", "fmt,nope")
    refused(proj, "GENE_NOT_FOUND", "agent", "create", "a", "--genes", "fmt", "--genes", "nope")
    refused(proj, "INVALID_COMPOSITION", "agent", "create", "a", "--genes", "up,ex",
            "--composition", "cond")
    refused(proj, "USAGE_ERROR", "agent", "create", "a", "--genes", "fmt",
            "--composition", "loop")
    refused(proj, "USAGE_ERROR", "agent", "create", "a")  # --genes is required
    refused(proj, "USAGE_ERROR", "agent", "create", "--genes", "fmt")  # NAME is required
    refused(proj, "INVALID_AGENT", "agent", "create", "a", "--genes", "fmt,")
    refused(proj, "INVALID_AGENT", "agent", "create", "a", "--genes", "")
    for bad in ["bad name", "../a", ".hidden", "a/b", "x" * 200]:
        refused(proj, "INVALID_AGENT", "agent", "create", bad, "--genes", "fmt")
    (proj / "genes" / "up" / "phenotype.json").write_text("{}")
    refused(proj, "INVALID_PHENOTYPE", "agent", "create", "a", "--genes", "up")
    # the quota is checked before the genes, the genes before anything is made
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "create", "a", "--genes", "nope",
            "--memory-quota", "0MB")
    assert_not_created(proj, "a")
    assert agent_list(proj) == [] and store_agents(proj) == []
    assert not list((proj / ".rotifer" / "agents").glob("*"))


def test_create_an_existing_agent(proj: Path) -> None:
    ok(proj, "agent", "create", "a", "--genes", "fmt", "--memory-quota", "1MB")
    ok(proj, "agent", "run", "a", "--input", '{"code": "x", "indent": 4}')
    spec = spec_path(proj, "a").read_text()
    err = refused(proj, "AGENT_EXISTS", "agent", "create", "a", "--genes", "up",
                  "--memory-quota", "2MB")
    assert "'a'" in last_line(err)
    assert spec_path(proj, "a").read_text() == spec
    assert listed(proj)["a"]["quotaBytes"] == MB and listed(proj)["a"]["usedBytes"] == 17
    assert json.loads(ok(proj, "agent", "run", "a", "--input", '{"code": "x"}'))["indent"] == 4


# -- list -------------------------------------------------------------------------------------


def test_list(proj: Path) -> None:
    assert ok(proj, "agent", "list").startswith("No agents")
    assert agent_list(proj) == []
    ok(proj, "agent", "create", "b", "--genes", "up,ex", "--composition", "par")
    ok(proj, "agent", "create", "a", "--genes", "fmt", "--memory-quota", "1KB")
    ok(proj, "agent", "run", "a", "--input", '{"code": "x", "indent": 4}')
    lines = ok(proj, "agent", "list").splitlines()
    assert lines[0].split() == ["NAME", "GENES", "COMPOSITION", "MEMORY"]
    assert [line.split() for line in lines[1:]] == [
        ["a", "fmt", "seq", "17", "B", "/", "1", "KB"],
        ["b", "up,ex", "par", "0", "B", "/", "10", "MB"]]
    docs = agent_list(proj)
    assert [(d["name"], d["genes"], d["composition"], d["usedBytes"], d["quotaBytes"])
            for d in docs] == [("a", ["fmt"], "seq", 17, 1024), ("b", ["up", "ex"], "par", 0,
                                                                     10 * MB)]


def test_list_refuses_an_agent_whose_memory_is_gone(proj: Path) -> None:
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    (proj / ".rotifer" / "playground.db").unlink()
    refused(proj, "MEMORY_STORAGE_ERROR", "agent", "list")


# -- run and update-genes: the formatter that remembers the indent ----------------------------


def test_the_formatter_remembers_the_indent(proj: Path) -> None:
    ok(proj, "agent", "create", "fmt-agent", "--genes", "fmt")
    first = ok(proj, "agent", "run", "fmt-agent", "--input",
               '{"code": "a\\n  b", "indent": 4}')
    assert json.loads(first) == {"formatted": "    a\n    b", "indent": 4}
    second = ok(proj, "agent", "run", "fmt-agent", "--input", '{"code": "c"}')
    assert json.loads(second) == {"formatted": "    c", "indent": 4}
    assert len(second.splitlines()) == 1
    assert listed(proj)["fmt-agent"]["usedBytes"] == len("formatter/indent") + 1
    writes = [line for line in audit(proj) if line["action"] == "write"]
    assert len(writes) == 1 and writes[0]["key"] == "formatter/indent"
    assert writes[0]["category"] == "PREFERENCE" and writes[0]["agent"] == "fmt-agent"
    # input forms as for `rotifer run`
    assert json.loads(ok(proj, "agent", "run", "fmt-agent", "--input", "-",
                         stdin='{"code": "d"}'))["indent"] == 4


def test_a_stale_gene_gets_a_hint_and_no_memory(proj: Path) -> None:
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    ok(proj, "agent", "run", "a", "--input", '{"code": "x", "indent": 4}')
    (proj / "genes" / "fmt" / "gene.py").write_text(FORMATTER + "\n# edited, not wrapped\n")
    for inp in ['{"code": "x", "indent": 8}', '{"code": "x"}']:
        err = refused(proj, "MEMORY_ACCESS_DENIED", "agent", "run", "a", "--input", inp)
        hints = [line for line in err.splitlines() if line.startswith("hint: ")]
        assert len(hints) == 1 and "gene 'fmt' changed" in hints[0]
        assert "rotifer wrap fmt" in hints[0]
    assert listed(proj)["a"]["usedBytes"] == 17  # nothing written
    denied = [line for line in audit(proj) if line["action"] == "access_denied"]
    assert len(denied) == 2 and all(line["agent"] == "a" for line in denied)
    wrap(proj, "fmt")  # wrapped again: a new id, and SAME_DOMAIN lets it read the old entry
    assert json.loads(ok(proj, "agent", "run", "a", "--input", '{"code": "x"}'))["indent"] == 4


def test_update_genes_keeps_the_memory(proj: Path) -> None:
    add_gene(proj, "fmt2", BETTER_FORMATTER)
    wrap(proj, "fmt2")
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    ok(proj, "agent", "run", "a", "--input", '{"code": "x", "indent": 3}')
    memory = ok(proj, "agent", "memory", "list", "a", "--json")
    out = ok(proj, "agent", "update-genes", "a", "--genes", "fmt2")
    assert "fmt2" in out and "memory is unchanged" in out
    assert listed(proj)["a"]["genes"] == ["fmt2"]
    assert ok(proj, "agent", "memory", "list", "a", "--json") == memory
    # the better formatter of the same domain reads the indent the old one saved
    assert json.loads(ok(proj, "agent", "run", "a", "--input", '{"code": "y"}')) == {
        "version": 2, "formatted": "   y", "indent": 3}
    ok(proj, "agent", "update-genes", "a", "--genes", "up,ex", "--composition", "par")
    assert (listed(proj)["a"]["genes"], listed(proj)["a"]["composition"]) == (["up", "ex"], "par")
    ok(proj, "agent", "update-genes", "a", "--genes", "ex,up")  # the composition stays
    assert listed(proj)["a"]["composition"] == "par"


def test_update_genes_refusals_change_nothing(proj: Path) -> None:
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    spec = spec_path(proj, "a").read_text()
    refused(proj, "AGENT_NOT_FOUND", "agent", "update-genes", "nobody", "--genes", "fmt")
    refused(proj, "GENE_NOT_FOUND", "agent", "update-genes", "a", "--genes", "nope")
    refused(proj, "INVALID_COMPOSITION", "agent", "update-genes", "a", "--genes", "up,ex",
            "--composition", "cond")
    refused(proj, "USAGE_ERROR", "agent", "update-genes", "a", "--genes", "fmt",
            "--composition", "bogus")
    refused(proj, "USAGE_ERROR", "agent", "update-genes", "a")
    refused(proj, "INVALID_AGENT", "agent", "update-genes", "a", "--genes", ",")
    assert spec_path(proj, "a").read_text() == spec


def test_run_refusals(proj: Path) -> None:
    refused(proj, "AGENT_NOT_FOUND", "agent", "run", "nobody", "--input", "{}")
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    refused(proj, "INVALID_INPUT", "agent", "run", "a", "--input", "{oops")
    refused(proj, "USAGE_ERROR", "agent", "run", "a")
    (proj / "genes" / "fmt" / "gene.py").unlink()  # its gene is gone
    refused(proj, "INVALID_GENE", "agent", "run", "a", "--input", "{}")
    (proj / "genes" / "fmt" / "gene.py").write_text(FORMATTER)
    # the gene crashes on bad input: GENE_FAILED, no traceback
    done = run(proj, "agent", "run", "a", "--input", '{"code": 5, "indent": 1}')
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert last_line(done.stderr).startswith("GENE_FAILED: ")


def test_a_wasm_agent_keeps_its_memory(proj: Path) -> None:
    add_wat_gene(proj, "prefs", "prefs")
    ok(proj, "compile", "prefs")
    ok(proj, "agent", "create", "w", "--genes", "prefs")
    assert json.loads(ok(proj, "agent", "run", "w", "--input", "{}")) == {"indent": 2}
    assert json.loads(ok(proj, "agent", "run", "w", "--input", '{"indent": 7}')) == {"indent": 7}
    assert json.loads(ok(proj, "agent", "run", "w", "--input", "{}")) == {"indent": 7}
    # stale WASM: the gene rejects its input with the memory's refusal, and a hint
    (proj / "genes" / "prefs" / "gene.wasm").unlink()
    err = refused(proj, "MEMORY_ACCESS_DENIED", "agent", "run", "w", "--input", "{}")
    assert "hint: gene 'prefs' changed" in err
