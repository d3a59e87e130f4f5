"""The history page's picture: an agent's memory use over time, by category.

Drawn from the audit log alone, oldest line first: every committed line says
how many bytes it adds (``write``, ``import``; an ``update`` its new size minus
``previousBytes``) or frees (``delete``, ``evict``, ``expire``,
``deployer_delete``, the moves' removals), and a ``drop_agent`` or ``move``
ends the agent's memory here.  Refusals change nothing.  So a gene filling
the quota shows as a rising band before the quota is full.

Server-rendered SVG (stacked step areas, one per category, and the quota as a
dashed line): no script, no build step.  Many lines are reduced to at most
:data:`BUCKETS` points, each the state after the last line of its time slice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rotifer.memory.audit.actions import (
    ACCESS_DENIED,
    ENDED,
    EVICT,
    EXPIRE,
    QUOTA_EXCEEDED,
    REMOVE_ACTIONS,
    REMOVED,
)
from rotifer.memory.audit.history import Step, step_of
from rotifer.memory.clock import format_time, parse_time
from rotifer.memory.model import Category
from rotifer.text import human_size

BUCKETS = 360
WIDTH, HEIGHT, PAD = 720, 240, 40
#: Bottom to top (the category cleanup takes first on top).
ORDER = (Category.PREFERENCE, Category.CONTEXT, Category.PATTERN, Category.CACHE)


@dataclass(frozen=True)
class Point:
    at_us: int
    bytes: dict[Category, int]


def series(lines: Iterable[Mapping[str, Any]]) -> list[Point]:
    """Bytes per category after each line that changes them, oldest first."""
    steps: list[Step] = []
    for line in lines:
        try:
            at = parse_time(str(line.get("ts")))
        except ValueError:
            continue
        step = step_of(at, line.get("action"), line.get("key"), line.get("category"),
                       int(line.get("bytes") or 0))
        if step is not None:
            steps.append(step)
    return series_of(steps)


def _draws(step: Step) -> bool:
    """Does the step make a point (a known set or a removal of a key, an end)?"""
    code = step[1]
    return code == ENDED or (code >= 0 and step[2] is not None)


def _span(steps: list[Step], most: int) -> tuple[int, int] | None:
    """(start, span) of the times of the steps that make a point, if more than
    ``most`` do (else ``None``: every point is kept).  The first and the last
    such step are found from either end, and counting stops past ``most``."""
    first = next((s for s in steps if _draws(s)), None)
    last = next((s for s in reversed(steps) if _draws(s)), None)
    if first is None or last is None:
        return None
    counted = 0
    for step in steps:
        if _draws(step):
            counted += 1
            if counted > most:
                return first[0], max(last[0] - first[0], 1)
    return None


def series_of(steps: Iterable[Step], most: int | None = None) -> list[Point]:
    """:func:`series` of the steps :func:`~rotifer.memory.audit.history.usage_steps`
    gives (a key may be its hash there: only its identity counts); with ``most``,
    already reduced as :func:`buckets` reduces it: the state is copied only at
    the last step of each time slice (a history of 100,000 lines is drawn from
    360 copies, not 100,000)."""
    order = list(Category)
    steps = steps if isinstance(steps, list) else list(steps)
    window = None if most is None else _span(steps, most)
    start, span = window if window is not None else (0, 1)
    slices = most if window is not None and most is not None else 0
    sizes: dict[object, tuple[int, int]] = {}
    now = [0] * len(order)
    raw: list[tuple[int, tuple[int, ...]]] = []
    #: slice -> the state after its last step (a slice met again, out of time
    #: order, keeps its place and takes the later state, as in :func:`buckets`)
    kept: dict[int, tuple[int, tuple[int, ...]]] = {}
    current: int | None = None
    last_at = 0
    ended = ENDED
    for at, code, key, size in steps:
        if code == ended:
            pass
        elif code < 0 or key is None:
            continue
        if slices:  # copy the state only when a slice ends (before this step changes it)
            at_slice = min(slices - 1, (at - start) * slices // span)
            if at_slice != current:
                if current is not None:
                    kept[current] = (last_at, tuple(now))
                current = at_slice
            last_at = at
        if code < ended:
            old = sizes.get(key)
            if old is not None:
                now[old[0]] -= old[1]
            sizes[key] = (code, size)
            now[code] += size
        elif code == ended:
            sizes.clear()
            now = [0] * len(order)
        else:
            gone = sizes.pop(key, None)
            if gone is not None:
                now[gone[0]] -= gone[1]
        if not slices:
            raw.append((at, tuple(now)))
    if slices and current is not None:
        kept[current] = (last_at, tuple(now))
        raw = list(kept.values())
    return [Point(at, dict(zip(order, values, strict=True))) for at, values in raw]


def buckets(points: list[Point], most: int = BUCKETS) -> list[Point]:
    """At most ``most`` points: the last state in each equal slice of time."""
    if len(points) <= most:
        return points
    start, end = points[0].at_us, points[-1].at_us
    span = max(end - start, 1)
    kept: dict[int, Point] = {}
    for point in points:
        kept[min(most - 1, (point.at_us - start) * most // span)] = point
    return list(kept.values())


def nice_top(value: int) -> int:
    """The smallest round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power
    of ten) at or above ``value``: an axis that ends close above the data."""
    step = 1
    while True:
        for m in (10, 12, 15, 20, 25, 30, 40, 50, 60, 80):
            if m * step >= value * 10:
                return max(1, m * step // 10)
        step *= 10


#: What the chart marks below its time axis, by audit action.
MARKS = {EVICT: "evict", EXPIRE: "evict", ACCESS_DENIED: "refusal", QUOTA_EXCEEDED: "refusal"}
#: The marks of the chart's steps, by :func:`~rotifer.memory.audit.actions.step_code`.
STEP_MARKS = {REMOVED + i: MARKS[action] for i, action in enumerate(REMOVE_ACTIONS)
              if action in MARKS}


def svg(points: list[Point], quota: int, marks: Iterable[tuple[int, str]] = ()) -> str:
    """The picture as an SVG element (numbers and fixed words only: nothing a gene
    wrote).  The value axis reaches just above the highest use, so a small memory
    still fills the picture; the quota is a dashed line when it is in range, else a
    note.  ``marks``: (time, ``evict`` | ``refusal``) ticks under the time axis."""
    if not points:
        return ('<svg class="chart" viewBox="0 0 720 60" role="img" aria-label="no changes">'
                '<text class="label" x="10" y="30">No changes in the log yet.</text></svg>')
    points = buckets(points)
    start, end = points[0].at_us, points[-1].at_us
    span = max(end - start, 1)
    highest = max(sum(p.bytes.values()) for p in points)
    top = nice_top(max(highest + highest // 10, 1))
    if quota <= top * 1.25:  # the quota is near: show it on the same scale
        top = nice_top(quota)
    left, plot_w, plot_h = PAD + 30, WIDTH - 2 * PAD - 30, HEIGHT - 2 * PAD

    def x(at: int) -> float:
        return left + (at - start) * plot_w / span

    def y(value: float) -> float:
        return HEIGHT - PAD - value * plot_h / top

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="memory use over time by category: now '
             f'{human_size(sum(points[-1].bytes.values()))} of {human_size(quota)}">']
    for i in range(5):  # the value axis: 0, a quarter ... the top, in bytes
        value = top * i / 4
        parts.append(f'<line class="grid" x1="{left}" y1="{y(value):.1f}" '
                     f'x2="{left + plot_w}" y2="{y(value):.1f}"/><text class="tick" '
                     f'x="{left - 4}" y="{y(value) + 4:.1f}" text-anchor="end">'
                     f'{human_size(int(value))}</text>')
    below = [0] * len(points)
    for category in ORDER:
        above = [b + p.bytes[category] for b, p in zip(below, points, strict=True)]
        if any(a != b for a, b in zip(above, below, strict=True)):
            upper = _steps([x(p.at_us) for p in points], [y(v) for v in above], x(end))
            lower = _steps([x(p.at_us) for p in points], [y(v) for v in below], x(end))
            path = upper + " " + " ".join(reversed(lower.split(" ")))
            parts.append(f'<polygon class="area {category.value.lower()}" points="{path}">'
                         f'<title>{category.value}</title></polygon>')
        below = above
    if quota <= top:
        qy = y(quota)
        parts.append(f'<line class="quota" x1="{left}" y1="{qy:.1f}" x2="{left + plot_w}" '
                     f'y2="{qy:.1f}"/><text class="label" x="{left + plot_w}" '
                     f'y="{qy - 4:.1f}" text-anchor="end">quota {human_size(quota)}</text>')
    else:
        parts.append(f'<text class="label" x="{left + plot_w}" y="{PAD - 8}" '
                     f'text-anchor="end">quota {human_size(quota)} (above the chart)</text>')
    base = HEIGHT - PAD
    parts.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{left + plot_w}" '
                 f'y2="{base}"/><line class="axis" x1="{left}" y1="{PAD}" x2="{left}" '
                 f'y2="{base}"/>')
    for i in range(4):  # the time axis: four times, UTC
        at = start + span * i // 3
        anchor = ("start", "middle", "middle", "end")[i]
        parts.append(f'<text class="tick" x="{x(at):.1f}" y="{base + 16}" '
                     f'text-anchor="{anchor}">{format_time(at)[:16].replace("T", " ")}</text>')
    for at, kind in marks:
        if start <= at <= end and kind in ("evict", "refusal"):
            parts.append(f'<rect class="mark {kind}" x="{x(at) - 1:.1f}" y="{base + 20}" '
                         f'width="2" height="8"><title>{kind}</title></rect>')
    parts.append(f'<text class="label" x="{left}" y="{PAD - 8}">now '
                 f'{human_size(sum(points[-1].bytes.values()))} (UTC times; marks: '
                 f'evictions and expiries orange, refusals red)</text></svg>')
    return "".join(parts)


def _steps(xs: list[float], ys: list[float], last_x: float) -> str:
    """A step line's points: each value holds until the next point's time."""
    out = []
    for i, (px, py) in enumerate(zip(xs, ys, strict=True)):
        nx = xs[i + 1] if i + 1 < len(xs) else last_x
        out.append(f"{px:.1f},{py:.1f} {max(nx, px + 0.5):.1f},{py:.1f}")
    return " ".join(out)
