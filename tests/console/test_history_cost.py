"""What keeps a 500-line history page cheap, without changing what it shows.

The timeline's rows are made in Python (:mod:`rotifer.console.timeline`);
each row shows what the template showed when it read the lines itself, down
to the odd line (a field missing, ``None``, of another type, a gene's hostile
strings).  And the console freezes what it started with out of the garbage
collector's full passes (:func:`rotifer.console.server.settle`)."""

from __future__ import annotations

import jinja2

from rotifer.console.app import HERE
from rotifer.console.pages import HIGHLIGHT
from rotifer.console.timeline import timeline_rows
from rotifer.text import shown


def rendered(lines: list[dict[str, object]], names: dict[str, str]) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True)
    env.filters.update(shown=shown, plural=lambda n, one: f"{n} {one}")
    env.globals.update(url_for=lambda *a, **k: "/x", timeline_rows=timeline_rows)
    return env.get_template("timeline.html").render(
        name="a", lines=lines, matched=None, skip=0, older=None, newer=None,
        highlight=HIGHLIGHT, names=names, q={}, export_query="")


def items(html: str) -> list[str]:
    """Each ``<li>`` of the timeline, its whitespace collapsed."""
    body = html.split('<ol class="timeline">', 1)[1].split("</ol>", 1)[0]
    return [" ".join(part.split()) for part in body.split("<li")[1:]]


def test_each_field_as_the_line_has_it() -> None:
    names = {"v2:g": "keeper\u202e<b>"}
    rows = items(rendered([
        {"ts": "T1", "action": "write", "key": "k\x1b<script>", "category": "CACHE",
         "actor": "v2:g", "bytes": 3, "seq": 7, "context": {"thread_id": "t<1", "run_id": "r"}},
        {"ts": "T2", "action": "access_denied", "key": None, "category": None, "actor": None,
         "bytes": 0, "code": "ACCESS_DENIED", "reason": "not <yours>"},
        {"ts": "T3", "action": "rolled_back", "seq": 5},
        {"ts": None, "action": "export", "bytes": None, "context": {}, "seq": None,
         "actor": "deployer"},
        {},
    ], names))
    assert rows[0] == (
        'class=""> <time>T1</time> <span class="seq">#7</span> <strong class="action">write</strong> '
        '<code class="key-cell" title="k\\x1b&lt;script&gt;">k\\x1b&lt;script&gt;</code> '
        '<span class="cat cache">CACHE</span> <span class="num">3 B</span> <span '
        'class="small">by keeper\\u202e&lt;b&gt;</span> <span class="small context">thread '
        't&lt;1 run r</span> </li>')
    # no seq at all: "#" (a seq of None: nothing)
    assert rows[1].startswith('class="refusal"> <time>T2</time> <span class="seq">#</span>')
    assert '<span class="warn">ACCESS_DENIED: not &lt;yours&gt;</span>' in rows[1]
    assert "key-cell" not in rows[1] and 'class="cat' not in rows[1]
    assert rows[2].startswith('class="rolled"> <time>T3</time> <span class="seq">#5</span>')
    # None shown as the template showed it; an empty context still gets its span
    assert '<time>None</time> <span class="seq"></span>' in rows[3]
    assert '<span class="num">None B</span>' in rows[3] and "by deployer" in rows[3]
    assert '<span class="small context"></span>' in rows[3]
    # a line with no fields at all: empty cells, a key cell with nothing in it
    assert rows[4] == ('class=""> <time></time> <span class="seq">#</span> <strong '
                       'class="action"></strong> <code class="key-cell" title=""></code> '
                       '<span class="num"> B</span> <span class="small">by </span> </li>')


def test_settle_freezes_what_the_console_started_with() -> None:
    """``rotifer console`` calls :func:`rotifer.console.server.settle` once it is
    ready: afterwards the collector's full passes walk only the objects made
    since (a fresh process, so the test runner's own objects stay as they are)."""
    import subprocess
    import sys

    code = ("import gc\nfrom rotifer.console.app import create_app\n"
            "from rotifer.console.server import settle\n"
            "before = len(gc.get_objects())\nsettle()\n"
            "print(before, len(gc.get_objects()), gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    before, after, frozen = map(int, out)
    assert after < before // 10 and frozen >= before // 2, out
