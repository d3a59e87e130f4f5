"""Ready for Citus: every key of the agent tables starts with ``agent_id``.

Citus distributes a table by one column and requires that column in every
primary key and unique constraint; statements that name one ``agent_id`` then
run on one shard.  This reads the schema the store made from the catalog, so
a new table or index that would break sharding by agent fails here (see
docs/backends.md, "Sharding by agent").
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from rotifer.memory import MemoryStore

pytestmark = pytest.mark.postgres

#: Tables that hold no agent's data (Citus reference tables): the schema version.
REFERENCE_TABLES = {"memory_meta"}

KEYS_SQL = """
SELECT t.relname, i.relname, ix.indisprimary,
       (SELECT a.attname FROM pg_attribute a
         WHERE a.attrelid = t.oid AND a.attnum = ix.indkey[0])
  FROM pg_index ix
  JOIN pg_class i ON i.oid = ix.indexrelid
  JOIN pg_class t ON t.oid = ix.indrelid
  JOIN pg_namespace n ON n.oid = t.relnamespace
 WHERE n.nspname = current_schema() AND ix.indisunique
"""

TABLES_SQL = """
SELECT c.relname,
       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                AND a.attname = 'agent_id' AND NOT a.attisdropped)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relkind = 'r'
"""


def test_every_key_of_an_agent_table_starts_with_agent_id(pg_fresh_url: str,
                                                         tmp_path: Path) -> None:
    MemoryStore.open(tmp_path / ".rotifer", pg_fresh_url).close()
    with psycopg.connect(pg_fresh_url) as conn:
        tables = dict(conn.execute(TABLES_SQL).fetchall())
        keys = conn.execute(KEYS_SQL).fetchall()
    assert {"memory_agents", "memory_entries", "memory_audit"} <= set(tables)
    assert set(tables) - REFERENCE_TABLES, tables
    for table, has_agent in tables.items():
        if table not in REFERENCE_TABLES:
            assert has_agent, f"{table} holds no agent_id: it cannot be sharded by agent"
    wrong = [(table, index) for table, index, _primary, first in keys
             if table not in REFERENCE_TABLES and first != "agent_id"]
    assert not wrong, f"unique keys that do not start with agent_id: {wrong}"
    primaries = {table for table, _index, primary, _first in keys if primary}
    assert set(tables) <= primaries, "every table has a primary key"
