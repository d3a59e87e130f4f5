"""The tables: checked with one SELECT on every open, created or upgraded in steps.

Every CLI command and every ``run_agent`` opens a store, often while other
workers write.  So opening reads the recorded schema version (one SELECT that
takes no lock a writer holds) and stops there when it is current.  DDL --
even ``CREATE INDEX IF NOT EXISTS``, which waits for every write in progress
on the table -- runs only when something is missing, inside one transaction
under an advisory lock so that many workers starting at once apply each step
exactly once.

The schema is built by numbered steps, :data:`STEPS`: step *n* takes a
database at version *n - 1* to version *n*.  A new version adds its step as
the next entry; a database written by a newer rotifer (a higher version) is
refused rather than guessed at.

The last guard behind the store's rules is in the tables: a column's own
``CHECK`` lives in a domain (step 7: the server keeps a domain's planned,
where a table's ``CHECK`` is parsed and planned again in every statement);
only ``used_bytes <= quota_bytes``, over two columns, is a table ``CHECK``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors

from ...errors import storage
from ...model import Category, Scope, SharePolicy

Connection = psycopg.Connection[tuple[Any, ...]]

_CATEGORIES = ", ".join(f"'{c.value}'" for c in Category)
_SCOPES = ", ".join(f"'{s.value}'" for s in Scope)
_SHARES = ", ".join(f"'{s.value}'" for s in SharePolicy)

STEP_1: Final = f"""
CREATE TABLE IF NOT EXISTS memory_meta (
    name text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_agents (
    agent_id text COLLATE "C" PRIMARY KEY,
    quota_bytes bigint NOT NULL CHECK (quota_bytes > 0),
    max_retention_days integer,
    anonymization_supported boolean NOT NULL,
    used_bytes bigint NOT NULL CHECK (used_bytes >= 0),
    next_seq bigint NOT NULL,
    -- The store checks the quota, and this keeps a bug from committing past it.
    CHECK (used_bytes <= quota_bytes)
);
CREATE TABLE IF NOT EXISTS memory_entries (
    agent_id text COLLATE "C" NOT NULL REFERENCES memory_agents (agent_id),
    key text COLLATE "C" NOT NULL,
    category text NOT NULL CHECK (category IN ({_CATEGORIES})),
    value bytea NOT NULL,
    size bigint NOT NULL,
    created_by text NOT NULL,
    creator_domain text,
    last_accessed_by text NOT NULL,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL,
    read_scope text NOT NULL CHECK (read_scope IN ({_SCOPES})),
    write_scope text NOT NULL CHECK (write_scope IN ({_SCOPES})),
    share_policy text NOT NULL CHECK (share_policy IN ({_SHARES})),
    retention jsonb,
    expires_us bigint,
    seq bigint NOT NULL,
    PRIMARY KEY (agent_id, key)
);
CREATE INDEX IF NOT EXISTS memory_entries_cleanup
    ON memory_entries (agent_id, category, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_recent
    ON memory_entries (agent_id, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_expiry
    ON memory_entries (agent_id, expires_us, seq) WHERE expires_us IS NOT NULL;
"""


def _step_1(conn: Connection) -> None:
    """The first schema: meta, agents, entries and the three scan indexes.

    ``IF NOT EXISTS`` because databases made before the version was checked
    first may have some of it already."""
    for statement in STEP_1.split(";"):
        if statement.strip():
            conn.execute(statement)


STEP_2: Final = """
ALTER TABLE memory_agents ADD COLUMN IF NOT EXISTS last_us bigint NOT NULL DEFAULT 0;
UPDATE memory_agents a SET last_us = coalesce((SELECT max(updated_us) FROM memory_entries e
    WHERE e.agent_id = a.agent_id), 0);
CREATE TABLE IF NOT EXISTS memory_audit (
    id bigserial PRIMARY KEY,
    agent_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    line text NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_audit_agent ON memory_audit (agent_id, id)
"""


def _step_2(conn: Connection) -> None:
    """Issue 15.  ``memory_agents.last_us``: the time of the agent's last change,
    so the next one is stamped after it whatever the clock does (existing agents
    start from their newest entry's update time).  ``memory_audit``: every
    change's audit lines, inserted in the change's own transaction -- so every
    worker's lines of an agent are in one place, in commit order (``id`` order
    per agent: the agent's row lock is held while they are inserted), and only
    lines of committed changes.  Kept when an agent is dropped: it is history."""
    for statement in STEP_2.split(";"):
        if statement.strip():
            conn.execute(statement)


STEP_3: Final = """
ALTER TABLE memory_agents ADD COLUMN IF NOT EXISTS epoch text NOT NULL DEFAULT '';
ALTER TABLE memory_agents ADD COLUMN IF NOT EXISTS head text NOT NULL DEFAULT ''
"""


def _step_3(conn: Connection) -> None:
    """Issue 22.  ``memory_agents.epoch`` (which memory of the agent this is; its
    changes' audit lines carry it) and ``head`` (the hash of the last audit line
    of its last committed change: the anchor ``audit verify`` checks)."""
    for statement in STEP_3.split(";"):
        if statement.strip():
            conn.execute(statement)


STEP_4: Final = """
CREATE TABLE IF NOT EXISTS memory_audit_index (
    agent_id text COLLATE "C" NOT NULL,
    file_no bigint NOT NULL,
    off bigint NOT NULL,
    len integer NOT NULL,
    seq bigint,
    epoch text NOT NULL,
    ts_us bigint NOT NULL,
    action text NOT NULL,
    key_hash bigint,
    category text,
    nbytes bigint NOT NULL,
    PRIMARY KEY (agent_id, file_no, off)
);
CREATE TABLE IF NOT EXISTS memory_audit_indexed (
    agent_id text COLLATE "C" PRIMARY KEY,
    epoch text NOT NULL,
    simple boolean NOT NULL
)
"""


def _step_4(conn: Connection) -> None:
    """The history index (see :mod:`rotifer.memory.audit.index`): where each
    agent's audit lines are in this worker's log, and for which agents it is
    whole.  Both keyed by ``agent_id`` first."""
    for statement in STEP_4.split(";"):
        if statement.strip():
            conn.execute(statement)


STEP_5: Final = """
ALTER TABLE memory_audit DROP CONSTRAINT IF EXISTS memory_audit_pkey;
ALTER TABLE memory_audit ADD PRIMARY KEY (agent_id, id);
DROP INDEX IF EXISTS memory_audit_agent
"""


def _step_5(conn: Connection) -> None:
    """Ready to shard by agent: every primary key and unique constraint of the
    agent tables starts with ``agent_id`` (Citus requires the distribution column
    in each), so ``memory_audit``'s key becomes ``(agent_id, id)`` -- which is
    also the order every reader asks for, so the old ``(agent_id, id)`` index
    goes.  ``memory_meta`` holds no agent's data: a reference table (see
    docs/backends.md, "Sharding by agent")."""
    for statement in STEP_5.split(";"):
        if statement.strip():
            conn.execute(statement)


def _step_6(conn: Connection) -> None:
    """``memory_audit_index.digest``: each indexed line's SHA-256 (see
    :mod:`rotifer.memory.audit.index`); rows made before have none."""
    conn.execute("ALTER TABLE memory_audit_index ADD COLUMN IF NOT EXISTS digest bytea")


#: The domains of step 7: each one's base type and the CHECK it carries.
DOMAINS: Final = {"memory_category": ("text", f"VALUE IN ({_CATEGORIES})"),
                  "memory_scope": ("text", f"VALUE IN ({_SCOPES})"),
                  "memory_share_policy": ("text", f"VALUE IN ({_SHARES})"),
                  "memory_quota_bytes": ("bigint", "VALUE > 0"),
                  "memory_used_bytes": ("bigint", "VALUE >= 0")}
#: Per table, the columns that move to a domain; each one's CHECK of STEP_1
#: goes, by the name PostgreSQL gave it (``memory_agents_check``, used_bytes
#: <= quota_bytes, two columns, stays a table CHECK).
DOMAIN_COLUMNS: Final = {
    "memory_entries": {"category": "memory_category", "read_scope": "memory_scope",
                       "write_scope": "memory_scope", "share_policy": "memory_share_policy"},
    "memory_agents": {"quota_bytes": "memory_quota_bytes", "used_bytes": "memory_used_bytes"}}

#: After the domains exist (made bare by :func:`_step_7`).  Every statement may
#: run again: a step re-applied (a damaged version) must not fail.
STEP_7: Final = "".join(
    [f"ALTER DOMAIN {name} DROP CONSTRAINT IF EXISTS {name}_check;\n" for name in DOMAINS]
    + [f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_{column}_check;\n"
       for table, columns in DOMAIN_COLUMNS.items() for column in columns]
    + [f"ALTER TABLE {table} " + ", ".join(f"ALTER COLUMN {column} TYPE {domain}"
                                          for column, domain in columns.items()) + ";\n"
       for table, columns in DOMAIN_COLUMNS.items()]
    + [f"ALTER DOMAIN {name} ADD CONSTRAINT {name}_check CHECK ({check});\n"
       for name, (_base, check) in DOMAINS.items()])


def _step_7(conn: Connection) -> None:
    """Issue 33: the columns with a CHECK of their own are domains whose CHECK
    is the one the column had -- the same values refused, with the same
    SQLSTATE (23514, check_violation): ``memory_entries``' category, read and
    write scope and share policy (over text), ``memory_agents``' quota_bytes
    and used_bytes (over bigint).

    Speed: PostgreSQL reads a table CHECK's stored expression back, plans and
    compiles it in every statement that writes the table, while a domain's
    CHECK is kept planned in the type cache.  Measured with callgrind on the
    server running a write's statements: the entries' four save 158k of 949k
    instructions per write (17%), the agents' two another 20k (see
    docs/benchmarks.md, "the CHECKs as domains").  Clients still
    see text and integers (a row description names the base type).

    Without a rewrite of the tables or their indexes: the domains are made
    without their CHECK (a column moves to a domain with a CHECK only by a
    rewrite; to a bare one over its own type, binary-coercibly, in place), the
    old CHECKs go first (kept, ALTER TYPE would re-validate them with a scan
    of the table), and each ``ADD CONSTRAINT`` then checks the stored rows.
    All in upgrade()'s one transaction: no one sees the columns unchecked.

    The domains are made in the current schema, the tables' (a domain of the
    same name elsewhere on the search path is not this schema's)."""
    made = conn.execute(
        "SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
        "WHERE n.nspname = current_schema() AND t.typname = ANY(%s)",
        (list(DOMAINS),)).fetchall()
    for name, (base, _check) in DOMAINS.items():
        if (name,) not in made:
            conn.execute(f"CREATE DOMAIN {name} AS {base}")
    for statement in STEP_7.split(";"):
        if statement.strip():
            conn.execute(statement)


#: Step n takes a database from version n - 1 to version n.
STEPS: Final[dict[int, Callable[[Connection], None]]] = {
    1: _step_1, 2: _step_2, 3: _step_3, 4: _step_4, 5: _step_5, 6: _step_6, 7: _step_7}
SCHEMA_VERSION: Final = max(STEPS)

#: Everything an open needs to know, in one statement that takes no lock a writer holds.
CHECK_SQL: Final = ("SELECT current_schema(), current_setting('server_encoding'), "
                    "(SELECT value FROM memory_meta WHERE name = 'schema_version'), "
                    "pg_is_in_recovery()")
VERSION_SQL: Final = "SELECT value FROM memory_meta WHERE name = 'schema_version'"


def advisory_key(schema: str, name: str) -> int:
    """A signed 64-bit advisory lock key for (schema, name), e.g. an agent id."""
    digest = hashlib.sha256(
        b"rotifer-memory\x00" + schema.encode() + b"\x00"
        + name.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _version(text: str | None, location: str) -> int:
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        raise storage(f"the memory database at {location} has schema version {text!r}, "
                      "which this rotifer cannot read") from None


def _refuse_newer(version: int, location: str) -> None:
    if version > SCHEMA_VERSION:
        raise storage(f"the memory database at {location} has schema version {version}; "
                      f"this rotifer knows {SCHEMA_VERSION}")


def _check_environment(schema: str | None, encoding: str | None, location: str) -> str:
    if encoding is None or encoding.upper() not in ("UTF8", "UTF-8"):
        raise storage(
            f"the memory database at {location} must use UTF8 encoding "
            f"(it uses {encoding or 'unknown'}), so keys order by code point")
    if schema is None:
        raise storage(f"the memory database at {location} has no schema to use "
                      "(check search_path)")
    return schema


def check(conn: Connection, location: str) -> tuple[str, int, bool] | None:
    """(current schema, recorded version, whether the server is a standby in
    recovery), or None when there are no tables yet.

    After None, a transaction ``conn`` was in is aborted: roll it back."""
    try:
        row = conn.execute(CHECK_SQL).fetchone()
    except pg_errors.UndefinedTable:
        return None
    if row is None:  # pragma: no cover - a SELECT without FROM always has a row
        return None
    schema = _check_environment(row[0], row[1], location)
    version = _version(row[2], location)
    _refuse_newer(version, location)
    return schema, version, bool(row[3])


def environment(conn: Connection, location: str) -> str:
    """The current schema, after checking the encoding (for a database without tables)."""
    row = conn.execute("SELECT current_schema(), current_setting('server_encoding')").fetchone()
    return _check_environment(row[0] if row else None, row[1] if row else None, location)


def upgrade(conn: Connection, schema: str, location: str) -> None:
    """Apply the missing steps; ``conn`` is in a transaction the caller commits.

    Under the advisory lock the version is read again: another worker may
    have applied the steps while this one waited."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key(schema, "\x00schema"),))
    exists = conn.execute("SELECT to_regclass('memory_meta') IS NOT NULL").fetchone()
    version = 0
    if exists and exists[0]:
        row = conn.execute(VERSION_SQL).fetchone()
        version = _version(row[0] if row else None, location)
    _refuse_newer(version, location)
    for step in range(version + 1, SCHEMA_VERSION + 1):
        STEPS[step](conn)
    if version < SCHEMA_VERSION:
        conn.execute("INSERT INTO memory_meta VALUES ('schema_version', %s) "
                     "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                     (str(SCHEMA_VERSION),))
