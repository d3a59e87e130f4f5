"""Schema step 7 (PostgreSQL): an entry's category, scopes and share policy are
domains over text, an agent's quota and byte total domains over bigint, whose
CHECKs refuse what the tables' CHECKs refused.

The CHECKs are the last guard behind the store's own rules: a bug that tried
to store a category, scope or share policy the model does not know, a quota
of 0 or a negative byte total, must fail at the server.  A table CHECK is re-read and planned in every statement that
writes the table; a domain's CHECK is kept planned in the server's type cache
(issue 33: that is what the step saves).  These tests read the server's own
answers -- the refusals, the catalog, the files of the table -- on a database
made fresh and on one upgraded from step 6 with entries in it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors

from rotifer.memory import AgentMemoryError, MemoryStore
from rotifer.memory.model import AccessPolicy, Category, Scope, SharePolicy
from rotifer.memory.storage.postgres import PostgresBackend
from rotifer.memory.storage.postgres import schema as pg_schema

from .conftest import with_rotifer_schema, with_search_path
from .helpers import code_of, gene_id
from .test_postgres_backend import row

pytestmark = pytest.mark.postgres

Conn = psycopg.Connection[tuple[Any, ...]]

#: A value the model does not know, per column the step moves to a domain.
BAD = {"category": "SECRET", "read_scope": "EVERYONE", "write_scope": "NOBODY",
       "share_policy": "PUBLIC"}
COLUMNS = ("agent_id, key, category, value, size, created_by, creator_domain, "
           "last_accessed_by, created_us, updated_us, read_scope, write_scope, "
           "share_policy, retention, expires_us, seq")
GOOD = {"agent_id": "bot", "key": "k", "category": "CONTEXT", "value": b"v", "size": 2,
        "created_by": "g", "creator_domain": "d", "last_accessed_by": "g", "created_us": 1,
        "updated_us": 1, "read_scope": "SAME_DOMAIN", "write_scope": "SAME_DOMAIN",
        "share_policy": "PRIVATE", "retention": None, "expires_us": None, "seq": 1}
INSERT = (f"INSERT INTO memory_entries ({COLUMNS}) VALUES "
          f"({', '.join('%(' + c + ')s' for c in GOOD)})")
#: The store's own form of a write: an update of an existing key goes through
#: ``excluded``, whose values were coerced (and checked) on the way in.
UPSERT = INSERT + (" ON CONFLICT (agent_id, key) DO UPDATE SET "
                   "category = excluded.category, read_scope = excluded.read_scope, "
                   "write_scope = excluded.write_scope, share_policy = excluded.share_policy")
ENTRIES = 120  # a step-6 database's entries: every category, scope and share policy
FILL = f"""
INSERT INTO memory_entries ({COLUMNS})
SELECT 'bot', 'e/' || lpad(i::text, 4, '0'),
       (ARRAY['PREFERENCE', 'PATTERN', 'CONTEXT', 'CACHE'])[i % 4 + 1], '\\x00'::bytea, 1,
       'g', 'd', 'g', i, i,
       (ARRAY['CREATOR_GENE_ONLY', 'SAME_DOMAIN', 'ALL_GENES', 'DEPLOYER_CONFIGURED'])[i % 4 + 1],
       (ARRAY['CREATOR_GENE_ONLY', 'SAME_DOMAIN', 'ALL_GENES', 'DEPLOYER_CONFIGURED'])
           [i / 4 % 4 + 1],
       (ARRAY['PRIVATE', 'ANONYMIZED_SHARE', 'KNOWLEDGE_GENE'])[i % 3 + 1],
       NULL, CASE WHEN i % 5 = 0 THEN i + 1000 END, i
  FROM generate_series(1, {ENTRIES}) i
"""


def make_step_6(url: str, fill: bool = True) -> None:
    """A database as rotifer's schema version 6 left it, ``ENTRIES`` entries in it."""
    with psycopg.connect(url) as conn:
        for step in range(1, 7):
            pg_schema.STEPS[step](conn)
        conn.execute("INSERT INTO memory_meta VALUES ('schema_version', '6')")
        conn.execute("INSERT INTO memory_agents (agent_id, quota_bytes, anonymization_supported,"
                     " used_bytes, next_seq) VALUES ('bot', 1000000, false, %s, %s)",
                     (ENTRIES if fill else 0, ENTRIES + 1))
        if fill:
            conn.execute(FILL)


@pytest.fixture(params=["fresh", "upgraded"])
def made(request: pytest.FixtureRequest, pg_fresh_url: str) -> str:
    """A database at the current version: made by the store, or made at step 6 with
    entries and upgraded by the store's open."""
    if request.param == "upgraded":
        make_step_6(pg_fresh_url)
    PostgresBackend(pg_fresh_url).close()
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        if request.param == "fresh":
            conn.execute("INSERT INTO memory_agents (agent_id, quota_bytes, "
                         "anonymization_supported, used_bytes, next_seq) "
                         "VALUES ('bot', 1000000, false, 0, 1)")
        assert _version(conn) == pg_schema.SCHEMA_VERSION == 7
    return pg_fresh_url


def _version(conn: Conn) -> int:
    row_ = conn.execute("SELECT value FROM memory_meta WHERE name = 'schema_version'"
                        ).fetchone()
    assert row_ is not None
    return int(row_[0])


def _refused(conn: Conn, sql: str, params: dict[str, Any], domain: str) -> None:
    with pytest.raises(pg_errors.CheckViolation) as info:
        conn.execute(sql, params)
    assert info.value.diag.constraint_name == f"{domain}_check"
    assert f'value for domain {domain} violates check constraint "{domain}_check"' in str(
        info.value)


def test_a_bad_category_scope_or_share_policy_is_refused_by_the_server(made: str) -> None:
    with psycopg.connect(made, autocommit=True) as conn:
        conn.execute(INSERT, GOOD)
        for column, bad in BAD.items():
            domain = pg_schema.DOMAIN_COLUMNS["memory_entries"][column]
            _refused(conn, INSERT, {**GOOD, "key": "new", column: bad}, domain)
            _refused(conn, UPSERT, {**GOOD, column: bad}, domain)
            _refused(conn, f"UPDATE memory_entries SET {column} = %(bad)s "  # type: ignore[arg-type]
                     "WHERE key = 'k'", {"bad": bad}, domain)
        assert conn.execute("SELECT category, read_scope, write_scope, share_policy "
                            "FROM memory_entries WHERE key IN ('k', 'new')"
                            ).fetchall() == [("CONTEXT", "SAME_DOMAIN", "SAME_DOMAIN", "PRIVATE")]
        # The test bites: without the domains' CHECKs (and with no table CHECK
        # left behind them) the same values are stored.
        for domain in ENTRY_DOMAINS:
            conn.execute(f"ALTER DOMAIN {domain} DROP CONSTRAINT {domain}_check")  # type: ignore[arg-type]
        for column, bad in BAD.items():
            conn.execute(f"UPDATE memory_entries SET {column} = %(bad)s "  # type: ignore[arg-type]
                         "WHERE key = 'k'", {"bad": bad})
        conn.execute(INSERT, {**GOOD, "key": "new", "category": "SECRET"})
        assert conn.execute("SELECT category, read_scope, write_scope, share_policy "
                            "FROM memory_entries WHERE key IN ('k', 'new') ORDER BY key"
                            ).fetchall() == [(BAD["category"], BAD["read_scope"],
                                              BAD["write_scope"], BAD["share_policy"]),
                                             ("SECRET", "SAME_DOMAIN", "SAME_DOMAIN", "PRIVATE")]


ENTRY_DOMAINS = ("memory_category", "memory_scope", "memory_share_policy")
AGENT = ("INSERT INTO memory_agents (agent_id, quota_bytes, anonymization_supported, "
         "used_bytes, next_seq) VALUES (%(agent_id)s, %(quota)s, false, %(used)s, 1)")


def test_a_quota_or_byte_total_out_of_range_is_refused_by_the_server(made: str) -> None:
    """``memory_agents``: a quota above 0, a byte total from 0 up to the quota."""
    with psycopg.connect(made, autocommit=True) as conn:
        _refused(conn, AGENT, {"agent_id": "x", "quota": 0, "used": 0}, "memory_quota_bytes")
        _refused(conn, AGENT, {"agent_id": "x", "quota": -5, "used": 0}, "memory_quota_bytes")
        _refused(conn, AGENT, {"agent_id": "x", "quota": 10, "used": -1}, "memory_used_bytes")
        conn.execute(AGENT, {"agent_id": "x", "quota": 10, "used": 3})
        _refused(conn, "UPDATE memory_agents SET used_bytes = %(v)s WHERE agent_id = 'x'",
                 {"v": -1}, "memory_used_bytes")
        _refused(conn, "UPDATE memory_agents SET used_bytes = used_bytes - 4 "
                 "WHERE agent_id = 'x'", {}, "memory_used_bytes")
        _refused(conn, "UPDATE memory_agents SET quota_bytes = %(v)s WHERE agent_id = 'x'",
                 {"v": 0}, "memory_quota_bytes")
        with pytest.raises(pg_errors.CheckViolation) as info:  # the table's own CHECK
            conn.execute("UPDATE memory_agents SET used_bytes = 11 WHERE agent_id = 'x'")
        assert info.value.diag.constraint_name == "memory_agents_check"
        assert conn.execute("SELECT quota_bytes, used_bytes FROM memory_agents "
                            "WHERE agent_id = 'x'").fetchone() == (10, 3)
        # The test bites: without the domains' CHECKs the same values are stored.
        for domain in ("memory_quota_bytes", "memory_used_bytes"):
            conn.execute(f"ALTER DOMAIN {domain} DROP CONSTRAINT {domain}_check")  # type: ignore[arg-type]
        conn.execute(AGENT, {"agent_id": "y", "quota": 0, "used": 0})
        conn.execute("UPDATE memory_agents SET used_bytes = -1 WHERE agent_id = 'x'")
        assert conn.execute("SELECT agent_id, quota_bytes, used_bytes FROM memory_agents "
                            "WHERE agent_id IN ('x', 'y') ORDER BY 1"
                            ).fetchall() == [("x", 10, -1), ("y", 0, 0)]


CATALOG_SQL = """
SELECT 'column', attrelid::regclass::text || '.' || attname,
       format_type(atttypid, atttypmod) || ' ' || attnotnull::text
  FROM pg_attribute
 WHERE attrelid IN ('memory_entries'::regclass, 'memory_agents'::regclass)
   AND attnum > 0 AND NOT attisdropped
UNION ALL
SELECT 'check', CASE WHEN conrelid <> 0 THEN conrelid::regclass::text
                      ELSE contypid::regtype::text END || '.' || conname,
       pg_get_constraintdef(oid) || ' ' || convalidated::text
  FROM pg_constraint
 WHERE connamespace = current_schema()::regnamespace AND contype = 'c'
UNION ALL
SELECT 'index', indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()
 ORDER BY 1, 2
"""


DOMAIN_COLUMN_NAMES = [f"{table}.{column}" for table, columns in pg_schema.DOMAIN_COLUMNS.items()
                       for column in columns]


def _catalog(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        return [(kind, name, text.replace(f"{schema[0]}.", ""))
                for kind, name, text in conn.execute(CATALOG_SQL).fetchall()]


def test_a_fresh_and_an_upgraded_database_end_the_same(pg_schemas: Any) -> None:
    fresh, fresh_url = pg_schemas.new()
    old, old_url = pg_schemas.new()
    try:
        PostgresBackend(fresh_url).close()
        make_step_6(old_url)
        PostgresBackend(old_url).close()
        made = _catalog(fresh_url)
        assert made == _catalog(old_url)
    finally:
        pg_schemas.drop(fresh)
        pg_schemas.drop(old)
    checks = {name: text for kind, name, text in made if kind == "check"}
    columns = {name: text for kind, name, text in made if kind == "column"}
    # The six columns are domains; their table CHECKs are gone; the agents'
    # used_bytes <= quota_bytes stays.
    assert {c: columns[c] for c in DOMAIN_COLUMN_NAMES} == {
        "memory_entries.category": "memory_category true",
        "memory_entries.read_scope": "memory_scope true",
        "memory_entries.write_scope": "memory_scope true",
        "memory_entries.share_policy": "memory_share_policy true",
        "memory_agents.quota_bytes": "memory_quota_bytes true",
        "memory_agents.used_bytes": "memory_used_bytes true"}
    assert columns["memory_entries.key"] == 'text true'  # and the rest as they were
    assert not [name for name in checks if name.startswith("memory_entries.")]
    assert checks["memory_category.memory_category_check"] == (
        "CHECK ((VALUE = ANY (ARRAY['PREFERENCE'::text, 'PATTERN'::text, 'CONTEXT'::text, "
        "'CACHE'::text]))) true")
    assert checks["memory_used_bytes.memory_used_bytes_check"] == "CHECK ((VALUE >= 0)) true"
    assert {name: text for name, text in checks.items() if name.startswith("memory_agents.")
            } == {"memory_agents.memory_agents_check": "CHECK (((used_bytes)::bigint <= "
                  "(quota_bytes)::bigint)) true"}


FILES_SQL = """
SELECT c.relname, c.relfilenode FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace
   AND (c.relname LIKE 'memory\\_entries%' OR c.relname LIKE 'memory\\_agents%') ORDER BY 1
"""
ROWS_SQL = f"SELECT {COLUMNS} FROM memory_entries ORDER BY agent_id, key"
AGENTS_SQL = "SELECT * FROM memory_agents ORDER BY agent_id"


def test_an_upgrade_from_step_6_keeps_every_row_and_rewrites_nothing(pg_fresh_url: str
                                                                      ) -> None:
    make_step_6(pg_fresh_url)
    with psycopg.connect(pg_fresh_url) as conn:
        rows = conn.execute(ROWS_SQL).fetchall()
        agents = conn.execute(AGENTS_SQL).fetchall()
        files = conn.execute(FILES_SQL).fetchall()
    assert len(rows) == ENTRIES and len(agents) == 1
    assert {name for name, _ in files} >= {"memory_entries", "memory_entries_pkey",
                                           "memory_entries_cleanup", "memory_entries_recent",
                                           "memory_entries_expiry"}
    PostgresBackend(pg_fresh_url).close()
    with psycopg.connect(pg_fresh_url) as conn:
        assert _version(conn) == pg_schema.SCHEMA_VERSION
        assert conn.execute(ROWS_SQL).fetchall() == rows
        assert conn.execute(AGENTS_SQL).fetchall() == agents
        # The same files: neither the table nor any of its indexes was rewritten
        # (a rewrite gives a relation a new relfilenode).
        assert conn.execute(FILES_SQL).fetchall() == files
        assert conn.execute("SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE "
                            "attrelid = 'memory_entries'::regclass AND attname = 'category'"
                            ).fetchone() == ("memory_category",)


def test_a_step_6_database_holding_a_bad_value_is_not_upgraded(pg_fresh_url: str,
                                                               tmp_path: Path) -> None:
    """Its table CHECK dropped by hand, a step-6 database stored a bad category: the
    domain's CHECK refuses it when added, the upgrade stops and nothing changes."""
    make_step_6(pg_fresh_url)
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE memory_entries DROP CONSTRAINT memory_entries_category_check")
        conn.execute("UPDATE memory_entries SET category = 'SECRET' WHERE key = 'e/0007'")
        files = conn.execute(FILES_SQL).fetchall()
    code = code_of(lambda: MemoryStore.open(tmp_path / ".rotifer", url=pg_fresh_url))
    assert code.value == "MEMORY_STORAGE_ERROR"
    with pytest.raises(AgentMemoryError) as info:
        PostgresBackend(pg_fresh_url)
    assert 'column "category" of table "memory_entries" contains values that violate' in str(
        info.value)
    with psycopg.connect(pg_fresh_url) as conn:
        assert _version(conn) == 6
        assert conn.execute("SELECT count(*) FROM memory_entries WHERE category = 'SECRET'"
                            ).fetchone() == (1,)
        assert conn.execute("SELECT to_regtype('memory_category')").fetchone() == (None,)
        assert conn.execute(FILES_SQL).fetchall() == files


def test_entries_read_back_as_the_same_text(made: str, tmp_path: Path,
                                           request: pytest.FixtureRequest) -> None:
    """Through the backend, the store and psycopg: the domains reach a client as
    text, so every value comes back as the str it was."""
    combos = [(c, Scope(list(Scope)[i % 4]), Scope(list(Scope)[(i + 1) % 4]),
               SharePolicy(list(SharePolicy)[i % 3])) for i, c in enumerate(Category)]
    backend = PostgresBackend(made)
    written = []
    with backend.write("bot") as tx:
        for i, (category, read, write, share) in enumerate(combos):
            r = row(f"r/{i}", seq=10_000 + i, category=category, agent_id="bot")
            r = r._replace(access=AccessPolicy(read, write, share))
            tx.put(r)
            written.append(r)
    with backend.read() as tx:
        assert [tx.get("bot", r.key) for r in written] == written
    backend.close()
    with psycopg.connect(made) as conn:
        cur = conn.execute("SELECT category, read_scope, write_scope, share_policy "
                           "FROM memory_entries ORDER BY key")
        assert cur.description is not None
        assert {d.type_code for d in cur.description} == {25}  # text, not the domains' oids
        stored = cur.fetchall()
    assert all(type(v) is str for r in stored for v in r)
    with MemoryStore.open(tmp_path / ".rotifer", url=made) as store:
        store.create_agent("a")
        g = store.for_gene("a", gene_id("g"), "d")
        entry = g.write_memory("k", b"v", "PATTERN", {"readScope": "ALL_GENES",
                                                      "writeScope": "CREATOR_GENE_ONLY",
                                                      "sharePolicy": "PRIVATE"})
        again = g.read_memory("k")
        assert again is not None and again == entry
        assert (again.category, again.access_policy) == (
            "PATTERN", AccessPolicy(Scope.ALL_GENES, Scope.CREATOR_GENE_ONLY,
                                    SharePolicy.PRIVATE))
        # The upgraded database's own entries, as FILL wrote them at step 6.
        scopes = list(Scope)
        with store.backend.read() as tx:
            found = [tx.get("bot", f"e/{i:04}") for i in range(1, ENTRIES + 1)]
    if request.node.callspec.params["made"] == "fresh":
        assert found == [None] * ENTRIES
        return
    assert [(r_.category, r_.access) for r_ in found if r_ is not None] == [
        (list(Category)[i % 4], AccessPolicy(scopes[i % 4], scopes[i // 4 % 4],
                                             list(SharePolicy)[i % 3]))
        for i in range(1, ENTRIES + 1)]


def test_step_7_applied_again_changes_nothing(made: str) -> None:
    """A database whose version was set back (damaged) gets the step again: it
    must neither fail nor rewrite, and the CHECKs stay."""
    with psycopg.connect(made, autocommit=True) as conn:
        conn.execute(INSERT, GOOD)
        rows = conn.execute(ROWS_SQL).fetchall()
        files = conn.execute(FILES_SQL).fetchall()
        conn.execute("UPDATE memory_meta SET value = '6' WHERE name = 'schema_version'")
    PostgresBackend(made).close()
    with psycopg.connect(made, autocommit=True) as conn:
        assert _version(conn) == pg_schema.SCHEMA_VERSION
        assert conn.execute(ROWS_SQL).fetchall() == rows
        assert conn.execute(FILES_SQL).fetchall() == files
        _refused(conn, INSERT, {**GOOD, "key": "new", "share_policy": "PUBLIC"},
                 "memory_share_policy")


def test_the_domains_are_the_schemas_own(pg_url: str, pg_schemas: Any) -> None:
    """A domain of the same name in another schema on the search path (another
    rotifer's, or anyone's) is neither taken for this schema's nor used."""
    other, other_url = pg_schemas.new()
    mine, _ = pg_schemas.new()
    try:
        with psycopg.connect(other_url, autocommit=True) as conn:
            conn.execute("CREATE DOMAIN memory_category AS text")  # no CHECK at all
        url = with_search_path(pg_url, f"{mine},{other}")
        make_step_6(url, fill=False)
        PostgresBackend(url).close()
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute(
                "SELECT n.nspname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                "JOIN pg_namespace n ON n.oid = t.typnamespace WHERE a.attname = 'category' "
                "AND a.attrelid = 'memory_entries'::regclass").fetchone() == (mine,)
            _refused(conn, INSERT, {**GOOD, "category": "SECRET"}, "memory_category")
    finally:
        pg_schemas.drop(mine)
        pg_schemas.drop(other)


def test_a_schema_whose_name_needs_quotes(pg_url: str, pg_schemas: Any) -> None:
    """``rotifer_schema=Memory_...``: the step finds its domains by the schema's
    exact name (read as an identifier it would be lower case), made and made again."""
    schema = "Memory_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
    try:
        url = with_rotifer_schema(pg_url, schema)
        PostgresBackend(url).close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'UPDATE "{schema}".memory_meta SET value = \'6\'')  # type: ignore[arg-type]
        PostgresBackend(url).close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute(f'SELECT value FROM "{schema}".memory_meta'  # type: ignore[arg-type]
                                ).fetchone() == (str(pg_schema.SCHEMA_VERSION),)
            assert conn.execute(
                "SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                "WHERE n.nspname = %s AND t.typtype = 'd'", (schema,)).fetchone() == (
                    len(pg_schema.DOMAINS),)
    finally:
        pg_schemas.drop(schema)
