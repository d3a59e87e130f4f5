"""The agent's audit log (``.rotifer/audit.jsonl``) and the local telemetry file.

The audit log is write-ahead: the store appends the lines for a change *before*
it commits the change, and aborts the change if the lines cannot be written.
How lines reach the file -- one locked ``O_APPEND`` write per change, a file
kept open but checked at every append to still be the log (so a log made
read-only, moved or deleted is noticed at the next change, never written
around), torn lines cut off -- is :mod:`rotifer.memory.audit.file`.  Every
complete line is one JSON object, and a line can be missing its end only at
the very end of the file, until the next append.

Hash chain and sequence numbers.  Every line ends with ``"prev"``: the hex
SHA-256 of the exact bytes of the line before it in the log (without its
newline), or ``null`` for the very first line of a project's log.  The chain
is per file set, not per agent: the log is shared by all agents of a project
(and holds lines of no agent, such as refusals of ``rotifer run``), and one
chain over every line is what makes a removed, edited or reordered line of
*any* kind show.  It continues across rotation (the first line of a new file
names the last line of the file before it).  Every line of a change made in
an agent's transaction also carries ``"seq"``: the agent's change sequence
number (see :mod:`rotifer.memory.engine.changes`), the same on all lines of one
change, one more for each committed change of the agent.  Lines without
``seq`` (``export``, and refusals made before any transaction) change nothing.

A change whose lines were appended but which did not commit is followed by a
``rolled_back`` line naming its ``seq`` (written by the process itself when it
survives; after a crash by the next change of that agent when the phantom
lines are the last lines of the log, else by ``rotifer agent audit verify``).
A later change reusing a ``seq`` also proves the earlier one was never
committed: committed changes of an agent number 1, 2, 3, ... without gaps.

Rotation.  When an append would take ``audit.jsonl`` past ``max_bytes``
(``ROTIFER_AUDIT_MAX_BYTES``, default 64 MiB), the file is kept as
``audit.jsonl.N`` (N = 1, 2, ...: higher is newer) and a new ``audit.jsonl``
starts, its first line chained to the last line of the kept one.  Nothing is
deleted: removing old files is the deployer's decision (``verify`` then
reports that the log starts mid-chain).

Its room: above :mod:`rotifer.memory.storage` (the index's table is
storage's: :mod:`rotifer.memory.storage.index_sql`), below the engine and the
store; the readers (:mod:`.history`, :mod:`.verify`) take a store's parts
(:class:`.history.StoreParts`), not the store.  The action names
(:mod:`.actions`) are vocabulary every room may use.

Action names (the ``action`` field, one constant each in :mod:`.actions`):

=================  =========================================================
``write``          a new entry was created
``update``         an existing entry was replaced
``delete``         a gene deleted an entry
``evict``          an entry was removed to make room for a write
``expire``         an expired entry was removed
``quota_exceeded`` a write was refused for lack of space (nothing written)
``access_denied``  a read, write, query or delete was refused
``deployer_delete`` the deployer deleted an entry (``actor`` is ``deployer``)
``drop_agent``     an agent's whole memory was removed
``import_agent``   an agent was created by ``rotifer agent import``/``move``
``import``         an entry was written by ``rotifer agent import``/``move``
``export``         an agent's memory was copied to a file (changes nothing)
``move``           an agent's memory left for another store (``move_out``:
                   an entry carried, ``move_drop``: an entry left behind)
``rolled_back``    the change numbered ``seq`` was logged but not committed
=================  =========================================================
"""

from typing import TYPE_CHECKING

from ..lazy import loader

if TYPE_CHECKING:
    from .file import archives
    from .log import (
        DEFAULT_MAX_BYTES,
        DEPLOYER,
        MAX_BYTES_ENV,
        AuditLog,
        encode_lines,
        max_bytes_from_env,
        telemetry_enabled,
    )
    from .text import line_hash, rolled_back_line

#: Where each name lives.  Speed: loaded on first use (PEP 562), so that the
#: action names (``rotifer.memory.audit.actions``, vocabulary the storage
#: room uses) come without the log's writing machinery: ``rotifer agent
#: list`` imports none of it (tests/cli/test_startup_imports.py).
_HOMES = {"archives": ".file", "DEFAULT_MAX_BYTES": ".log", "DEPLOYER": ".log",
          "MAX_BYTES_ENV": ".log", "AuditLog": ".log", "encode_lines": ".log",
          "max_bytes_from_env": ".log", "telemetry_enabled": ".log", "line_hash": ".text",
          "rolled_back_line": ".text"}


__getattr__ = loader(__name__, _HOMES, globals())


__all__ = ["DEFAULT_MAX_BYTES", "DEPLOYER", "MAX_BYTES_ENV", "AuditLog", "archives",
           "encode_lines", "line_hash", "max_bytes_from_env", "rolled_back_line",
           "telemetry_enabled"]
