"""``rotifer agent list`` when one agent is broken: the others are still listed
on stdout, each broken one is reported on stderr as ``CODE: message``, and the
exit status is 1 so that a script notices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.genes.helpers import FORMATTER

from .helpers import ERROR_LINE, add_gene, init_project, ok, run, spec_path, wrap


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """Agents ``a``, ``b`` and ``c`` on the formatter gene."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "fmt", FORMATTER)
    wrap(root, "fmt")
    for name in ("a", "b", "c"):
        ok(root, "agent", "create", name, "--genes", "fmt")
    return root


BROKEN_SPECS = {
    "not JSON": "{",
    "not an object": "[1, 2]",
    "no genes": json.dumps({"format": 1, "name": "b", "composition": "seq"}),
    "wrong name": json.dumps({"format": 1, "name": "x", "genes": ["fmt"],
                              "composition": "seq"}),
    "not UTF-8": b"\xff\xfe{".decode("latin-1"),
}


@pytest.mark.parametrize("why", sorted(BROKEN_SPECS))
def test_a_malformed_spec_hides_no_other_agent(proj: Path, why: str) -> None:
    spec_path(proj, "b").write_text(BROKEN_SPECS[why], encoding="latin-1")
    for args in (("agent", "list"), ("agent", "list", "--json")):
        done = run(proj, *args)
        assert done.returncode == 1, done
        assert "Traceback" not in done.stderr
        errors = done.stderr.strip().splitlines()
        assert len(errors) == 1 and ERROR_LINE.match(errors[0]), done.stderr
        assert errors[0].startswith("INVALID_AGENT: ") and "b.json" in errors[0]
        if "--json" in args:
            assert [d["name"] for d in json.loads(done.stdout)] == ["a", "c"]
        else:
            rows = done.stdout.splitlines()
            assert rows[0].split()[0] == "NAME"
            assert [r.split()[0] for r in rows[1:]] == ["a", "c"]


def test_every_broken_agent_is_reported(proj: Path) -> None:
    spec_path(proj, "a").write_text("{")
    spec_path(proj, "c").write_text("null")
    done = run(proj, "agent", "list", "--json")
    assert done.returncode == 1
    assert [d["name"] for d in json.loads(done.stdout)] == ["b"]
    errors = done.stderr.strip().splitlines()
    assert [e.split(":")[0] for e in errors] == ["INVALID_AGENT", "INVALID_AGENT"]
    assert "a.json" in errors[0] and "c.json" in errors[1]


def test_only_broken_agents_print_no_table(proj: Path) -> None:
    for name in ("a", "b", "c"):
        spec_path(proj, name).write_text("{")
    done = run(proj, "agent", "list")
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 3


def test_an_agent_without_memory_hides_no_other_agent(proj: Path) -> None:
    # b's memory was moved to a store that is gone.
    doc = json.loads(spec_path(proj, "b").read_text())
    doc["memoryUrl"] = f"sqlite:{proj / 'elsewhere.db'}"
    spec_path(proj, "b").write_text(json.dumps(doc))
    done = run(proj, "agent", "list", "--json")
    assert done.returncode == 1, done
    assert [d["name"] for d in json.loads(done.stdout)] == ["a", "c"]
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("MEMORY_STORAGE_ERROR: "), errors
