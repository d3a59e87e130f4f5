"""Moving an agent's memory to another binding: export, import and move.

The seed: "When an agent moves to another binding, its PREFERENCE, PATTERN and
CONTEXT entries go with it, with their access policies, retention policies and
createdBy unchanged.  CACHE entries may be left behind and rebuilt."

* :func:`export_agent` writes one agent's memory to a JSON file (a copy: the
  source keeps it).  CACHE is left out unless ``keep_cache``.
* :func:`import_agent` loads such a file into a store that has no memory for
  that agent yet.  It is all-or-nothing: one backend write transaction creates
  the agent and every entry, then reads them back and checks the counts, the
  bytes and the checksums *before* it commits.
* :func:`move_agent` does both between two open stores (SQLite -> PostgreSQL
  or back) and then removes the agent from the source, so it lives in one
  place.  See :func:`move_agent` for how it stays all-or-nothing across two
  databases.

Entries are carried exactly as stored: key, category, value, createdBy,
lastAccessedBy, createdAt, updatedAt (to the microsecond), access and
retention policies, plus what the rules need beyond the seed's fields (the
creator's domain for SAME_DOMAIN, the write-order number for ties, the expiry
time).  The entryId is the same, because the agent id is.

Every side audits (actor ``deployer``), in the audit log of the store's
``MemoryStore`` (the project that runs the command; for a move, the source's at
both ends): ``export`` on the source; on the destination one ``import_agent``
line and one ``import`` line per entry (``via`` says ``file`` or ``move``);
for a move, on the source one ``move`` line, one ``move_out`` line per carried
entry and one ``move_drop`` line per CACHE entry left behind.  As everywhere,
the lines are appended before the change commits: no line, no change.  A move
into another project's store also writes to that project's log (``mirror``):
the agent's history it lacks, the move's lines and the import's, before the
destination commits; the anchor stays with the source's log.

Choices (documented in docs/backends.md):

* The destination must not have a memory for the agent yet: an import or move
  never merges or overwrites (MEMORY_INVALID_INPUT, nothing changed).  Merging
  two memories would have to pick winners per key and re-run cleanup; dropping
  the one already there would lose data.  (The CLI's refusal names the command that
  removes it: ``rotifer agent delete``.)
* An agent that has no memory in the source is MEMORY_NOT_FOUND.
* After a verified move the agent is dropped from the source, so it lives in
  exactly one place; an export leaves the source as it was.
* The agent keeps its quota and data policy unless ``quota_bytes`` gives the
  destination a different quota; a quota the carried entries do not fit is
  MEMORY_QUOTA_EXCEEDED, and nothing is changed anywhere (an import never
  evicts).

The file format (version 1)
---------------------------

A JSON object::

    {"format": "rotifer-agent-memory", "version": 1,
     "agent": "<agent id>", "exportedAt": "<RFC 3339>", "source": "<backend:where>",
     "keepCache": false,
     "settings": {"quotaBytes": 10485760,
                  "dataPolicy": {"maxRetentionDays": null, "anonymizationSupported": false},
                  "nextSeq": 42},
     "entries": [{"entry": <MemoryEntry.to_json(): the seed's JSON, value in base64>,
                  "creatorDomain": "formatter" | null,
                  "seq": 7,
                  "expiresUs": 1767225600000000 | null,
                  "sha256": "<hex>"}, ...],          # most recently updated first
     "counts": {"PREFERENCE": 1, "PATTERN": 0, "CONTEXT": 0, "CACHE": 0},
     "totalBytes": 123,                               # UTF-8 key bytes + value bytes
     "leftBehind": {"count": 3, "bytes": 900},        # CACHE entries not carried
     "sha256": "<hex>"}

``canonical(x)`` is ``json.dumps(x, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` in UTF-8.  An entry's ``sha256`` is the SHA-256 of
``canonical`` of its record without the ``sha256`` field.  The total
``sha256`` is the SHA-256 of ``canonical({"agent": ..., "settings": ...,
"entries": [each entry's sha256, in file order]})``.  ``exportedAt``,
``source`` and ``leftBehind`` are informational and not covered.  The
checksums catch damage, not tampering (anyone who can edit the file can
recompute them); so an import also re-checks every rule an entry must satisfy
(valid key and value, its entryId, a policy the data policy allows, an expiry
time that follows from its retention, the quota).

Streaming: an export, an import and a move hold a page of entries at a time,
never the agent (memory stays flat however large the agent is), and report
their progress to an optional :class:`~.document.Progress`.  The file is laid
out one entry per line so that it can be read in a stream too
(:mod:`.document`); any JSON parser still reads it as the object above.

The package: :mod:`.document` (the file: fields, checksums, streamed writing
and reading), :mod:`.checks` (the rules an imported entry must satisfy),
:mod:`.operations` (export and import), :mod:`.move`.

Its room in :mod:`rotifer.memory`, on top (it works on whole stores)::

    [transfer] > store > views > engine > audit > storage > vocabulary
"""

from __future__ import annotations

from .checks import check_export
from .document import CARRIED, FORMAT, VERSION, Progress, TransferReport, canonical, read_export
from .move import move_agent
from .operations import describe, export_agent, import_agent, verify_import

__all__ = [
    "CARRIED",
    "FORMAT",
    "VERSION",
    "Progress",
    "TransferReport",
    "canonical",
    "check_export",
    "describe",
    "export_agent",
    "import_agent",
    "move_agent",
    "read_export",
    "verify_import",
]
