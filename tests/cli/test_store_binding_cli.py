"""An agent records the store it was created on (issue 36, 3): a run without
the setting finds its memory there; a run on another store says where the
memory is (never a password); a misspelled key in config.json is refused."""

from __future__ import annotations

import json
from pathlib import Path

from rotifer.agents.project import store_words

from .helpers import add_gene, init_project, last_line, ok, refused, spec_path, wrap

GENE = "def express(input, ctx):\n    return input\n"


def test_agent_created_on_a_url_runs_there_without_it(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p")
    add_gene(root, "echo", GENE)
    wrap(root, "echo")
    url = f"sqlite:{tmp_path / 'elsewhere.db'}"
    ok(root, "agent", "create", "bot", "--genes", "echo",
            env={"ROTIFER_MEMORY_URL": url})
    assert json.loads(spec_path(root, "bot").read_text())["memoryUrl"] == url
    # without the variable: the recorded store, not the project's SQLite file
    assert json.loads(ok(root, "agent", "run", "bot", "--input", '{"a": 1}')) == {"a": 1}
    assert not (root / ".rotifer" / "playground.db").exists()
    # with the variable naming another store: where the memory is, and how to reach it
    other = f"sqlite:{tmp_path / 'other.db'}"
    ok(root, "agent", "create", "x", "--genes", "echo", env={"ROTIFER_MEMORY_URL": other})
    err = last_line(refused(root, "MEMORY_STORAGE_ERROR", "agent", "run", "bot",
                                 "--input", "{}", env={"ROTIFER_MEMORY_URL": other}))
    assert f"keeps its memory in the SQLite file {tmp_path / 'elsewhere.db'}" in err, err
    assert "unset $ROTIFER_MEMORY_URL" in err


def test_a_store_is_named_without_its_password() -> None:
    words = store_words("postgresql://rotifer:s3cret@db.example:6543/mem")
    assert words == "PostgreSQL db.example:6543/mem" and "s3cret" not in words


def test_config_refuses_an_unknown_key_with_the_closest_one(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p")
    add_gene(root, "echo", GENE)
    wrap(root, "echo")
    config = root / ".rotifer" / "config.json"
    config.write_text(json.dumps({"memoryURL": f"sqlite:{tmp_path / 'm.db'}"}))
    err = last_line(refused(root, "INVALID_CONFIG", "agent", "create", "bot",
                                 "--genes", "echo"))
    assert "'memoryURL'" in err and "did you mean 'memoryUrl'?" in err
    assert not spec_path(root, "bot").exists()
    config.write_text(json.dumps({"memoryUrl": f"sqlite:{tmp_path / 'm.db'}"}))
    ok(root, "agent", "create", "bot", "--genes", "echo")
    assert (tmp_path / "m.db").exists()


def test_agent_on_the_projects_store_run_on_another_says_where(tmp_path: Path) -> None:
    """Created without the variable, the agent's memory is in the project's store (its
    spec records null); a run with ROTIFER_MEMORY_URL naming another store -- one that
    does not exist, or one that holds other agents -- says so, and how to reach it."""
    root = init_project(tmp_path / "p")
    add_gene(root, "echo", GENE)
    wrap(root, "echo")
    ok(root, "agent", "create", "bot", "--genes", "echo")
    assert json.loads(spec_path(root, "bot").read_text())["memoryUrl"] is None
    missing = {"ROTIFER_MEMORY_URL": f"sqlite:{tmp_path / 'missing.db'}"}
    err = last_line(refused(root, "MEMORY_STORAGE_ERROR", "agent", "run", "bot", "--input",
                            "{}", env=missing))
    assert "keeps its memory in the project's SQLite file .rotifer/playground.db" in err, err
    assert "unset $ROTIFER_MEMORY_URL" in err
    other = {"ROTIFER_MEMORY_URL": f"sqlite:{tmp_path / 'other.db'}"}
    ok(root, "agent", "create", "x", "--genes", "echo", env=other)
    err = last_line(refused(root, "MEMORY_STORAGE_ERROR", "agent", "run", "bot", "--input",
                            "{}", env=other))
    assert "keeps its memory in the project's SQLite file .rotifer/playground.db" in err, err
