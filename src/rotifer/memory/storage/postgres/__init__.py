"""The scale-out backend: PostgreSQL through psycopg 3.

Chosen with ``ROTIFER_MEMORY_URL=postgresql://...``.  It implements the same
:mod:`~rotifer.memory.storage.backend` interface as SQLite, so every rule of the
Memory API (scopes, data policy, quota, cleanup order, retention, audit) is the
store's code, unchanged; this module only stores rows and hands them back in
the orders the rules need.

How concurrency is handled, and why
-----------------------------------

Many worker processes, each with its own connections, may write to one agent.
The store keeps a running byte total per agent and checks the quota against
it, so two writers on one agent must never overlap.  We use **row locks at
READ COMMITTED**, not SERIALIZABLE with retries:

* ``write(agent_id)`` begins a READ COMMITTED transaction and takes the agent's
  row with ``SELECT ... FOR UPDATE`` -- with its first statement, in one
  pipeline with it (:mod:`.transaction`).  A second writer on the same agent
  waits on that lock; once it has it, each of its statements (that first one
  included: it comes after the lock) takes a fresh snapshot and sees
  everything the first one committed.  Writers on different agents never wait
  for each other.
* A row lock cannot lock a row that does not exist yet (``create_agent``, or
  importing an agent).  When the agent row is missing, the transaction takes a
  transaction-scoped advisory lock keyed by (schema, agent id) and looks for
  the row again.  Everyone who finds no row queues on that advisory lock, so
  two creators of one agent are serialized and the second one sees the first
  one's row (and then holds its row lock too).
* Why not SERIALIZABLE: the store's transaction body appends its audit lines
  *before* the commit (write-ahead), so a transaction that fails at commit with
  a serialization error could only be retried by running the rules again and
  writing a second set of audit lines.  With one row lock per transaction and
  the lock taken first, there is nothing to serialize and no lock cycle: a
  transaction locks exactly one agent, and readers take no locks at all (MVCC).
  Deadlocks are impossible by construction, so retrying is reserved for the
  moment before the body runs (see below).
* ``read()`` is REPEATABLE READ, READ ONLY: one snapshot across all the pages
  of a keyset-paginated query, with no locks.

Retries: serialization/deadlock failures and a connection found dead are
retried a bounded number of times, but only in the round trip that begins a
transaction, takes the lock and runs the first statement (always a read) --
before the caller's body has decided anything, so a retry never repeats an
audit line.  A failure later in the transaction rolls back and surfaces as
MEMORY_STORAGE_ERROR.  ``lock_timeout`` bounds the wait for a busy agent (like
SQLite's busy timeout).

Threads and processes: each transaction borrows a connection from the
process's pool for the URL (shared by every thread and store, capped by
``rotifer_pool_size``) and gives it back at the end, so threads run their
transactions on separate connections, in parallel.  Connections inherited
across ``fork()`` are never used or closed by the child (closing one would end
the parent's session); the child opens its own.

Deployment (:mod:`.settings`): ``rotifer_*`` URL parameters say whether a
pooler (pgbouncer) is in between -- then no prepared statements, and in
transaction mode no session state at all (``SET LOCAL`` per transaction) --
and bound every call (``rotifer_timeout``): server-side timeouts, libpq's
connect and TCP timeouts, and a client-side watchdog (:mod:`.watchdog`) for
a server that stopped answering.

Ordering: keys are ``text COLLATE "C"`` in a UTF-8 database, so they compare
byte for byte, which is code point order -- the same order as SQLite's
BINARY collation.  Prefix queries use the range ``[prefix,
prefix_upper_bound(prefix))``, never ``LIKE``.  Values are ``bytea``; times
and counters are ``bigint`` microseconds.

The code is split along that line: :mod:`.connection` is how we talk to the
server (connections, the pool, retries), :mod:`.settings` what the URL says,
:mod:`.watchdog` the client-side time bound, :mod:`.schema` creates and
upgrades the tables, :mod:`.transaction` is the SQL of each backend operation,
and :mod:`.backend` puts them together behind the backend interface.
"""

from __future__ import annotations

import logging

from .backend import PostgresBackend
from .settings import describe_url
from .transaction import PostgresTransaction

__all__ = ["PostgresBackend", "PostgresTransaction", "describe_url"]

# psycopg logs a warning when a pipeline's connection is lost under it (a
# server killed, a failover); the store already reports that as
# MEMORY_STORAGE_ERROR.  Without a handler, Python's last-resort handler would
# print the warning raw on the user's stderr; an application that configures
# logging still receives it (this handler does not stop propagation).
logging.getLogger("psycopg").addHandler(logging.NullHandler())
