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

from rotifer.memory.audit.actions import ENDS, REMOVES, SETS
from rotifer.memory.audit.history import Step
from rotifer.memory.clock import format_time, parse_time
from rotifer.memory.model import Category
from rotifer.text import human_size

BUCKETS = 360
WIDTH, HEIGHT, PAD = 720, 220, 40
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
        category = line.get("category")
        steps.append((at, str(line.get("action")), line.get("key"),
                      category if isinstance(category, str) else None,
                      int(line.get("bytes") or 0)))
    return series_of(steps)


def series_of(steps: Iterable[Step], most: int | None = None) -> list[Point]:
    """:func:`series` of the steps :func:`~rotifer.memory.audit.history.usage_steps`
    gives (a key may be its hash there: only its identity counts); with ``most``,
    already reduced as :func:`buckets` reduces it (only the points kept are made:
    a history of 100,000 lines is drawn from 360)."""
    order = list(Category)
    index = {c.value: n for n, c in enumerate(order)}
    sizes: dict[object, tuple[int, int]] = {}
    now = [0] * len(order)
    raw: list[tuple[int, tuple[int, ...]]] = []
    for at, action, key, text, size in steps:
        if action in ENDS:
            sizes.clear()
            now = [0] * len(order)
        elif action in SETS and key is not None:
            n = index.get(text) if isinstance(text, str) else None
            if n is None:
                continue
            old = sizes.get(key)
            if old is not None:
                now[old[0]] -= old[1]
            sizes[key] = (n, size)
            now[n] += size
        elif action in REMOVES and key is not None:
            gone = sizes.pop(key, None)
            if gone is not None:
                now[gone[0]] -= gone[1]
        else:
            continue
        raw.append((at, tuple(now)))
    if most is not None and len(raw) > most:
        start, span = raw[0][0], max(raw[-1][0] - raw[0][0], 1)
        kept: dict[int, tuple[int, tuple[int, ...]]] = {}
        for point in raw:
            kept[min(most - 1, (point[0] - start) * most // span)] = point
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


def svg(points: list[Point], quota: int) -> str:
    """The picture as an SVG element (numbers and fixed words only: nothing a gene wrote)."""
    if not points:
        return ('<svg class="chart" viewBox="0 0 720 60" role="img" aria-label="no changes">'
                '<text x="10" y="30">No changes in the log yet.</text></svg>')
    points = buckets(points)
    start, end = points[0].at_us, points[-1].at_us
    span = max(end - start, 1)
    top = max(quota, *(sum(p.bytes.values()) for p in points), 1)
    plot_w, plot_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD

    def x(at: int) -> float:
        return PAD + (at - start) * plot_w / span

    def y(value: int) -> float:
        return HEIGHT - PAD - value * plot_h / top

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             'aria-label="memory use over time by category">']
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
    qy = y(quota)
    parts.append(f'<line class="quota" x1="{PAD}" y1="{qy:.1f}" x2="{WIDTH - PAD}" '
                 f'y2="{qy:.1f}"/><text class="label" x="{WIDTH - PAD}" y="{qy - 4:.1f}" '
                 f'text-anchor="end">quota {human_size(quota)}</text>')
    parts.append(f'<text class="label" x="{PAD}" y="{HEIGHT - 12}">{format_time(start)[:19]}'
                 f'</text><text class="label" x="{WIDTH - PAD}" y="{HEIGHT - 12}" '
                 f'text-anchor="end">{format_time(end)[:19]}</text>')
    parts.append(f'<text class="label" x="{PAD}" y="{PAD - 8}">now '
                 f'{human_size(sum(points[-1].bytes.values()))}</text></svg>')
    return "".join(parts)


def _steps(xs: list[float], ys: list[float], last_x: float) -> str:
    """A step line's points: each value holds until the next point's time."""
    out = []
    for i, (px, py) in enumerate(zip(xs, ys, strict=True)):
        nx = xs[i + 1] if i + 1 < len(xs) else last_x
        out.append(f"{px:.1f},{py:.1f} {max(nx, px + 0.5):.1f},{py:.1f}")
    return " ".join(out)
