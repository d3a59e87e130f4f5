"""Statements and round trips per call on PostgreSQL, and each call's time against SQLite.

Counted on the wire (:mod:`.wire`): the store reaches a throwaway server
(:mod:`.pgserver`) through a counting relay, so the figures are what psycopg
really sent, not what the code seems to do.  Each call runs ``WARM`` times
first (connections opened, statements prepared), then ``COUNTED`` times; the
table shows the counted calls' average (whole numbers when every call sent the
same).  Two deployments: direct (prepared statements after psycopg's 5th use,
session settings once per connection) and ``rotifer_pooler=transaction``
(what the store does behind pgbouncer in transaction mode: no prepared
statements, its settings with ``SET LOCAL`` in every transaction).

Times are medians per call in interleaved rounds (:func:`.timing.compare`),
SQLite (a real file, WAL) against PostgreSQL reached directly, not through
the relay.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rotifer.memory import AgentMemoryError, MemoryStore
from rotifer.memory.errors import ErrorCode

from .pgserver import MISSING, Server, find_bindir
from .report import format_seconds
from .timing import Settings, compare

AGENT, EVICTING = "rt", "rt-evict"
GENE_A, GENE_B = "v2:" + "a" * 64, "v2:" + "b" * 64
DOMAIN = "bench"
WARM, COUNTED = 8, 10
VALUE = 100
VICTIM_BYTES = len("c/000000") + VALUE  # an entry's size: key plus value

Op = Callable[[], object]


def missing_delete(delete: Callable[[str], None]) -> None:
    try:
        delete("missing/key")
    except AgentMemoryError as exc:
        if exc.code != ErrorCode.NOT_FOUND:
            raise


class Agents:
    """Two agents in one database, the keys each destructive call consumes.

    ``rt`` holds 100 ``q/`` entries, ``r/key`` (read by its writer only),
    ``x/key`` (read by two genes in turn), ``u/key`` (updated) and ``d/...``
    entries to delete; ``rt-evict`` is exactly full of 108-byte CACHE entries, so
    each new 108-byte PREFERENCE entry evicts one.
    """

    def __init__(self, store: MemoryStore, spare: int) -> None:
        value = os.urandom(VALUE)
        store.create_agent(AGENT, 1 << 30)
        a = store.for_gene(AGENT, GENE_A, DOMAIN)
        for i in range(100):
            a.write_memory(f"q/{i:03d}", value, "PATTERN")
        for key in ("r/key", "x/key", "u/key"):
            a.write_memory(key, value, "PATTERN")
        for i in range(spare):
            a.write_memory(f"d/{i:06d}", value, "CACHE")
        store.create_agent(EVICTING, spare * VICTIM_BYTES)
        e = store.for_gene(EVICTING, GENE_A, DOMAIN)
        for i in range(spare):
            e.write_memory(f"c/{i:06d}", value, "CACHE")
        self.value = value
        self.new: Iterator[int] = itertools.count()
        self.dels: Iterator[int] = itertools.count()
        self.evicts: Iterator[int] = itertools.count()

    def ops(self, store: MemoryStore) -> dict[str, Op]:
        """The measured calls, through ``store`` (any store on this database)."""
        a = store.for_gene(AGENT, GENE_A, DOMAIN)
        b = store.for_gene(AGENT, GENE_B, DOMAIN)
        e = store.for_gene(EVICTING, GENE_A, DOMAIN)
        readers = itertools.cycle((b, a))
        v = self.value
        return {
            "write_memory, new key": lambda: a.write_memory(f"n/{next(self.new):06d}", v,
                                                            "PATTERN"),
            "write_memory, update": lambda: a.write_memory("u/key", v, "PATTERN"),
            "read_memory, unchanged": lambda: a.read_memory("r/key"),
            "read_memory, changes lastAccessedBy": lambda: next(readers).read_memory("x/key"),
            "query_memory, 100 entries": lambda: a.query_memory({"keyPrefix": "q/",
                                                                 "limit": 100}),
            "delete_memory": lambda: a.delete_memory(f"d/{next(self.dels):06d}"),
            "delete_memory, missing key": lambda: missing_delete(a.delete_memory),
            "write_memory, evicts 1": lambda: e.write_memory(f"e/{next(self.evicts):06d}", v,
                                                             "PREFERENCE"),
        }


@dataclass(frozen=True)
class Count:
    round_trips: float
    statements: float
    #: The SQL the last counted call parsed, as labels, one per round trip
    #: (the statements of one round trip joined with ``;``).
    sql: tuple[str, ...]


def label(sql: str) -> str:
    """``SELECT memory_agents JOIN memory_entries``: the verb and the tables, short
    (statements sent in one query text joined with ``;``)."""
    return "; ".join(_label(part) for part in sql.split(";") if part.strip())


def _label(sql: str) -> str:
    words = sql.split()
    head = words[0].upper()
    if head in ("BEGIN", "COMMIT", "ROLLBACK"):
        return head
    if head == "SET":
        return " ".join(words[:3])
    if "set_config(" in sql:  # a pooler's settings for one transaction
        return "SELECT set_config"
    if head == "WITH":  # writes folded into one statement: each one's verb and table
        parts = re.findall(r"\b(INSERT INTO|UPDATE|DELETE FROM)\s+(?!SET\b)(\w+)", sql, re.I)
        return "WITH " + ", ".join(f"{verb.split()[0].upper()} {table}"
                                   for verb, table in parts)
    tables = re.findall(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(?!SET\b)(\w+)", sql, re.I)
    text = f"{head} {' JOIN '.join(dict.fromkeys(tables))}".rstrip()
    return text + (" FOR UPDATE" if "FOR UPDATE" in sql.upper() else "")


def by_round_trip(texts: list[str], trips: list[int]) -> tuple[str, ...]:
    """Labels of ``texts``, those sent in one round trip joined with ``;``."""
    groups: dict[int, list[str]] = {}
    for text, trip in zip(texts, trips, strict=True):
        groups.setdefault(trip, []).append(label(text))
    return tuple("; ".join(group) for group in groups.values())


def count(agents: Agents, url: str, server_port: int, rotifer_dir: Path) -> dict[str, Count]:
    """Per call: round trips and statements through the counting relay."""
    from .wire import Relay

    relay = Relay(server_port)
    try:
        relayed = url.replace(f":{server_port}/", f":{relay.port}/")
        with MemoryStore.open(rotifer_dir, relayed) as store:
            counts = {}
            for name, op in agents.ops(store).items():
                for _ in range(WARM):
                    op()
                trips0, stmts0, _ = relay.snapshot()
                for _ in range(COUNTED - 1):
                    op()
                text0 = relay.snapshot()[2]
                op()
                trips, stmts, _ = relay.snapshot()
                with relay.lock:
                    sql = by_round_trip(relay.texts[text0:], relay.trip_of[text0:])
                counts[name] = Count((trips - trips0) / COUNTED, (stmts - stmts0) / COUNTED,
                                     sql)
            return counts
    finally:
        relay.close()


def spare_entries(settings: Settings) -> int:
    """Entries each destructive call may consume: counting (two deployments),
    then the timed rounds."""
    return 2 * (WARM + COUNTED) + 2 + settings.rounds * settings.iters


def per_call(n: float) -> str:
    return f"{n:g}" if n == int(n) else f"{n:.1f}"


def run(root: Path, settings: Settings) -> str:
    """The round-trip table (markdown)."""
    spare = spare_entries(settings)
    lite = MemoryStore.open(root / "sqlite", f"sqlite:{root / 'sqlite' / 'rt.db'}")
    try:
        lite_agents = Agents(lite, spare)
        bindir = find_bindir()
        if bindir is None:
            t = compare(lite_agents.ops(lite), rounds=settings.rounds, iters=settings.iters)
            return render({}, {}, t, {}) + f"\n{MISSING}.\n"
        with Server(bindir) as server:
            url = server.database("roundtrips")
            pg = MemoryStore.open(root / "postgres", url)
            try:
                pg_agents = Agents(pg, spare)
                direct = count(pg_agents, url, server.port, root / "count")
                pooled = count(pg_agents, url + "?rotifer_pooler=transaction", server.port,
                               root / "count")
                lite_ops, pg_ops = lite_agents.ops(lite), pg_agents.ops(pg)
                lite_t, pg_t = {}, {}
                for name in lite_ops:
                    t = compare({"sqlite": lite_ops[name], "pg": pg_ops[name]},
                                rounds=settings.rounds, iters=settings.iters)
                    lite_t[name], pg_t[name] = t["sqlite"], t["pg"]
            finally:
                pg.close()
        return render(direct, pooled, lite_t, pg_t) + (
            f"\nPostgreSQL {server.version}; {WARM} warm-up calls, then {COUNTED} counted.\n")
    finally:
        lite.close()


def render(direct: dict[str, Count], pooled: dict[str, Count], lite: dict[str, float],
           pg: dict[str, float]) -> str:
    lines = ["| call | round trips (statements), direct | round trips (statements), "
             "pooler=transaction | PostgreSQL | SQLite | ratio | statements per round trip (as parsed, pooler) |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for name in lite:
        d, p = direct.get(name), pooled.get(name)
        cells = [f"{per_call(c.round_trips)} ({per_call(c.statements)})" if c else "–"
                 for c in (d, p)]
        pg_s = pg.get(name)
        ratio = f"{pg_s / lite[name]:.2f}×" if pg_s else "–"
        sql = ", ".join(f"`{s}`" for s in p.sql) if p else "–"
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | "
                     f"{format_seconds(pg_s) if pg_s else '–'} | {format_seconds(lite[name])} "
                     f"| {ratio} | {sql} |")
    return "\n".join(lines) + "\n"
