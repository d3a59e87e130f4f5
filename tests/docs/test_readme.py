"""What a new user reads first: right after the two commands, the README says
how to run ``rotifer`` itself (``make demo`` installs it into ``.venv``, which
is not on the PATH of the user's shell)."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_the_readme_says_how_to_run_rotifer_after_make_demo() -> None:
    two = section("Two commands")
    demo = two.index("make demo")
    after = two[demo:]
    assert ". .venv/bin/activate" in after
    assert "pipx install ." in after
    assert ".venv/bin/rotifer" in after
    # ... before anything else the section goes on to (make bench and the rest).
    assert after.index(". .venv/bin/activate") < after.index("make bench")


def test_the_readme_shows_the_id_the_demo_prints(tmp_path: Path) -> None:
    """The demo's ``rotifer wrap formatter`` line in the README quotes the start of
    the v2 id; the real command, on a copy of the example, prints that id."""
    import re
    import shutil

    from tests.cli.helpers import init_project, ok

    shown = re.search(r"rotifer wrap formatter +# Gene ID \(v2\): (v2:[0-9a-f]+)…",
                      README.read_text(encoding="utf-8"))
    assert shown is not None, "the README's demo steps no longer quote the v2 id"
    root = init_project(tmp_path / "demo")
    shutil.copytree(README.parent / "examples" / "formatter" / "genes", root / "genes",
                    dirs_exist_ok=True)
    out = ok(root, "wrap", "formatter")
    printed = re.search(r"^Gene ID \(v2\): (v2:[0-9a-f]{64})$", out, re.MULTILINE)
    assert printed is not None, out
    assert printed.group(1).startswith(shown.group(1)), (shown.group(1), printed.group(1))
    assert len(shown.group(1)) >= len("v2:") + 4
    assert re.search(r"^Gene ID \(v1\): [0-9a-f]{64}$", out, re.MULTILINE)  # documented too
    assert "Gene ID (v1)" in README.read_text(encoding="utf-8")
