"""Agent names that would collide once the project is on macOS or Windows are
refused at ``agent create``: names that differ from an existing agent's only in
case, names Windows reserves for devices, and names ending in a dot.  Nothing
is created on a refusal; agents made before the rule still work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.genes.helpers import FORMATTER

from .helpers import (
    add_gene,
    agent_list,
    assert_not_created,
    init_project,
    last_line,
    ok,
    refused,
    spec_path,
    wrap,
)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "proj")
    add_gene(root, "fmt", FORMATTER)
    wrap(root, "fmt")
    return root


@pytest.mark.parametrize("name", ["UPPER", "Upper", "uPPER"])
def test_a_name_that_differs_only_in_case_is_refused(proj: Path, name: str) -> None:
    ok(proj, "agent", "create", "upper", "--genes", "fmt")
    err = refused(proj, "AGENT_EXISTS", "agent", "create", name, "--genes", "fmt")
    assert "'upper'" in last_line(err) and "case" in last_line(err)
    assert_not_created(proj, name, listing=False)
    assert [a["name"] for a in agent_list(proj)] == ["upper"]


RESERVED = ["CON", "con", "Prn", "aux", "NUL", "nul.txt", "NUL.tar.gz", "com1", "COM9",
            "COM0", "lpt1", "LPT9.json", "Aux.backup"]


@pytest.mark.parametrize("name", RESERVED)
def test_names_windows_reserves_are_refused(proj: Path, name: str) -> None:
    err = refused(proj, "INVALID_AGENT", "agent", "create", name, "--genes", "fmt")
    assert "Windows" in last_line(err)
    assert_not_created(proj, name, listing=False)


@pytest.mark.parametrize("name", ["trailing.", "two..", "a."])
def test_a_name_ending_in_a_dot_is_refused(proj: Path, name: str) -> None:
    refused(proj, "INVALID_AGENT", "agent", "create", name, "--genes", "fmt")
    assert_not_created(proj, name, listing=False)


@pytest.mark.parametrize("name", ["console", "nullable", "COM10", "lpt", "auxiliary",
                                  "con-1", "my.con", "a.b"])
def test_names_that_only_look_alike_are_fine(proj: Path, name: str) -> None:
    ok(proj, "agent", "create", name, "--genes", "fmt")
    assert name in [a["name"] for a in agent_list(proj)]


def test_an_agent_made_before_the_rule_still_works(proj: Path) -> None:
    # An agent "con" created by an older rotifer on Linux (its memory and spec).
    ok(proj, "agent", "create", "legacy", "--genes", "fmt")
    import sqlite3

    with sqlite3.connect(proj / ".rotifer" / "playground.db") as conn:
        conn.execute("UPDATE memory_agents SET agent_id = 'con' WHERE agent_id = 'legacy'")
    conn.close()
    doc = json.loads(spec_path(proj, "legacy").read_text())
    doc["name"] = "con"
    spec_path(proj, "con").write_text(json.dumps(doc))
    spec_path(proj, "legacy").unlink()
    assert [a["name"] for a in agent_list(proj)] == ["con"]
    out = ok(proj, "agent", "run", "con", "--input", json.dumps({"code": "x", "indent": 3}))
    assert json.loads(out)["indent"] == 3
    assert "formatter/indent" in ok(proj, "agent", "memory", "list", "con")
