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
