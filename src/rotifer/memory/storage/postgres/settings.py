"""What a deployer says in the memory URL: pooler, schema, time bound, connection cap.

The memory URL is the one setting a deployer gives (``ROTIFER_MEMORY_URL``,
``memoryUrl`` in ``.rotifer/config.json`` or an agent's binding), so rotifer's
own knobs are query parameters of it, all named ``rotifer_*`` and removed
before the rest of the URL goes to libpq (which would refuse them):

``rotifer_pooler=transaction|session|none``
    A connection pooler (pgbouncer) is in between.  Any pooler: no server-side
    prepared statements (a pooled server connection is not ours to keep them
    on).  ``transaction``: no session state at all either -- every setting is
    ``SET LOCAL`` inside the transaction that needs it.
``rotifer_schema=NAME``
    The schema the tables live in, set per transaction (a pooler refuses the
    ``options=-c search_path=...`` startup parameter).
``rotifer_timeout=SECONDS``
    The bound on every call (default :data:`TIMEOUT_S`): connecting, waiting
    for a pooled connection, lock waits, statements and a server that stopped
    answering all end in MEMORY_STORAGE_ERROR by then.
``rotifer_pool_size=N``
    At most this many connections per process to this database, shared by all
    threads and stores of the process (default :data:`POOL_SIZE`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...errors import storage

#: The default bound on one call, in seconds.
TIMEOUT_S: Final = 30.0
#: The default cap on connections per process (per database URL).
POOL_SIZE: Final = 10
#: How long a writer waits for a busy agent before MEMORY_STORAGE_ERROR.
LOCK_TIMEOUT_MS: Final = 30_000
POOLERS: Final = ("none", "session", "transaction")
#: Connection parameters we set unless the URL sets them itself.
CONNECT_DEFAULTS: Final = {
    "application_name": "rotifer-memory",
    # A dead peer or a dropped network is noticed by the kernel, not only by our timer.
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def describe_url(url: str) -> str:
    """``host:port/dbname`` of a URL, for messages: never the password.

    A multi-host URL (libpq's ``postgresql://h1:p1,h2:p2/db``, for a primary
    and its standbys) is shown host by host: ``h1:p1,h2:p2/db``."""
    try:
        params = conninfo_to_dict(split_url(url)[0])
    except psycopg.Error:
        return "an invalid PostgreSQL URL"
    hosts = str(params.get("host") or params.get("hostaddr") or "").split(",")
    ports = str(params.get("port") or "").split(",")
    if len(ports) == 1:  # libpq: one port is every host's
        ports = ports * len(hosts)
    pairs = [f"{host or 'localhost'}:{port or '5432'}"
             for host, port in zip(hosts, ports + [""] * (len(hosts) - len(ports)), strict=False)]
    return f"{','.join(pairs)}/{params.get('dbname') or params.get('user') or ''}"


def host_count(params: Mapping[str, object]) -> int:
    """How many servers a URL names (libpq tries them in order)."""
    return len(str(params.get("host") or params.get("hostaddr") or "").split(","))


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """(the URL without ``rotifer_*`` query parameters, those parameters)."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, {}
    kept: list[str] = []
    ours: dict[str, str] = {}
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if unquote(name).startswith("rotifer_"):
            ours[unquote(name)] = unquote(value)
        elif part:
            kept.append(part)
    return (base + "?" + "&".join(kept) if kept else base), ours


def _number(ours: dict[str, str], name: str, default: float, *, integer: bool) -> float:
    text = ours.pop(name, None)
    if text is None:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = -1
    if not math.isfinite(value) or value <= 0:
        raise storage(f"invalid PostgreSQL memory URL: {name} must be a positive "
                      f"{'whole ' if integer else ''}number, not {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class Settings:
    """A memory URL, understood."""

    #: What libpq gets: the URL without our parameters, plus our defaults.
    conninfo: str
    #: ``host:port/dbname``, for messages and the audit log.
    location: str
    pooler: str
    schema: str | None
    timeout_s: float
    pool_size: int
    #: None when the URL's own ``options=-c lock_timeout=...`` decides.
    lock_timeout_ms: int | None
    #: The URL names several servers or asks for a kind of server
    #: (``target_session_attrs``): a primary and standbys, where a failover is
    #: expected.  A connection that fails is then tried again until the call's
    #: bound, since the next primary may be seconds away; with one plain server
    #: a refused connection is reported at once.
    awaits_failover: bool = False

    @property
    def session_state(self) -> bool:
        """May settings live in the session (no transaction-mode pooler)?"""
        return self.pooler != "transaction"

    @property
    def statement_timeout_ms(self) -> int:
        return max(1, int(self.timeout_s * 1000))

    def settings_sql(self, scope: str) -> str:
        """``SET`` (scope ``""``) or ``SET LOCAL`` statements for our settings, as one text."""
        return "; ".join(self.settings_statements(scope))

    def settings_statements(self, scope: str) -> list[str]:
        """``SET`` (scope ``""``) or ``SET LOCAL`` statements for our settings, one each."""
        parts = [f"SET {scope}statement_timeout = {self.statement_timeout_ms}"]
        if not scope:
            # A change begun without BEGIN (backend.py, _open_on) runs at the
            # session's default level, and its lookup must see what the lock's
            # previous holder committed: READ COMMITTED, whatever the server,
            # database or role would make the default.
            parts.append("SET default_transaction_isolation = 'read committed'")
        if self.lock_timeout_ms is not None:
            parts.append(f"SET {scope}lock_timeout = "
                         f"{min(self.lock_timeout_ms, self.statement_timeout_ms)}")
        if self.schema is not None:
            parts.append(f"SET {scope}search_path = {quote_ident(self.schema)}")
        return parts

    def local_settings_sql(self) -> str:
        """:meth:`settings_statements` for one transaction as ONE statement:
        ``set_config(name, value, true)`` is ``SET LOCAL`` (behind a
        transaction-mode pooler they travel with every ``BEGIN``, and psycopg's
        work is per statement)."""
        parts = [("statement_timeout", str(self.statement_timeout_ms))]
        if self.lock_timeout_ms is not None:
            parts.append(("lock_timeout",
                          str(min(self.lock_timeout_ms, self.statement_timeout_ms))))
        if self.schema is not None:
            parts.append(("search_path", quote_ident(self.schema)))
        return "SELECT " + ", ".join(
            f"set_config('{name}', '{value.replace(chr(39), chr(39) * 2)}', true)"
            for name, value in parts)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse(url: str, *, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> Settings:
    """Read a memory URL; MEMORY_STORAGE_ERROR when it is not one."""
    libpq_url, ours = split_url(url)
    location = describe_url(url)
    try:
        given = conninfo_to_dict(libpq_url)
    except psycopg.Error as exc:
        raise storage(f"invalid PostgreSQL memory URL: {first_line(exc)}") from exc
    pooler = ours.pop("rotifer_pooler", "none").lower()
    if pooler not in POOLERS:
        raise storage(f"invalid PostgreSQL memory URL: rotifer_pooler must be one of "
                      f"{', '.join(POOLERS)}, not {pooler!r}")
    schema = ours.pop("rotifer_schema", None)
    if schema is not None and (not schema or "\x00" in schema):
        raise storage("invalid PostgreSQL memory URL: rotifer_schema must be a schema name")
    timeout_s = _number(ours, "rotifer_timeout", TIMEOUT_S, integer=False)
    pool_size = int(_number(ours, "rotifer_pool_size", POOL_SIZE, integer=True))
    if ours:
        raise storage(f"invalid PostgreSQL memory URL: unknown parameter {sorted(ours)[0]!r} "
                      "(rotifer knows rotifer_pooler, rotifer_schema, rotifer_timeout, "
                      "rotifer_pool_size)")
    defaults = dict(CONNECT_DEFAULTS)
    # libpq waits at least 2 s and counts whole seconds; our own timer bounds it anyway.
    defaults["connect_timeout"] = str(max(2, math.ceil(timeout_s)))
    defaults["tcp_user_timeout"] = str(int(timeout_s * 1000))
    conninfo = make_conninfo(libpq_url, **{k: v for k, v in defaults.items() if k not in given})
    # A lock_timeout given in the URL (options=-c lock_timeout=...) wins.
    own_lock = "lock_timeout" in str(given.get("options", ""))
    awaits = host_count(given) > 1 or "target_session_attrs" in given
    return Settings(conninfo=conninfo, location=location, pooler=pooler, schema=schema,
                    timeout_s=timeout_s, pool_size=pool_size,
                    lock_timeout_ms=None if own_lock else int(lock_timeout_ms),
                    awaits_failover=awaits)
