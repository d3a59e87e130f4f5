"""The embedded backend: one SQLite file, ``.rotifer/playground.db``.

Why these settings:

* WAL journal, so readers never block the writer and the writer never blocks
  readers; ``synchronous=NORMAL`` is durable across process crashes, which is
  what WAL guarantees at that level (an OS crash may lose the last commits).
* Every write transaction starts with ``BEGIN IMMEDIATE``: it takes the write
  lock up front, through the busy handler, instead of failing half-way with
  "database is locked" when a read transaction tries to upgrade.
* A generous busy timeout plus a bounded retry, so several processes on one
  agent queue up instead of surfacing SQLITE_BUSY to genes.

The package: :mod:`.schema` (the tables, as numbered steps), :mod:`.rows`
(encoding entries), :mod:`.transaction` (the SQL of each operation) and
:mod:`.backend` (the connection, opening, transactions).
"""

from ..sql_text import ROW_COLUMNS
from .backend import BUSY_TIMEOUT_S, SqliteBackend
from .rows import row_params
from .schema import SCHEMA_VERSION, STEP_1, STEPS
from .transaction import SqliteTransaction

__all__ = ["BUSY_TIMEOUT_S", "ROW_COLUMNS", "SCHEMA_VERSION", "STEPS", "STEP_1", "SqliteBackend",
           "SqliteTransaction", "row_params"]
