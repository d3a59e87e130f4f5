"""The audit log's action names (the ``action`` field of every line), one constant each.

What each means is the table in :mod:`rotifer.memory.audit`; the groups below
are how a reader replays them (:mod:`.replay`, the console's chart).  Adding
an action: a constant here, a row in that table, and the group it belongs to.
"""

from __future__ import annotations

from typing import Final

WRITE: Final = "write"
UPDATE: Final = "update"
DELETE: Final = "delete"
EVICT: Final = "evict"
EXPIRE: Final = "expire"
QUOTA_EXCEEDED: Final = "quota_exceeded"
ACCESS_DENIED: Final = "access_denied"
DEPLOYER_DELETE: Final = "deployer_delete"
DROP_AGENT: Final = "drop_agent"
IMPORT_AGENT: Final = "import_agent"
IMPORT: Final = "import"
EXPORT: Final = "export"
MOVE: Final = "move"
MOVE_OUT: Final = "move_out"
MOVE_DROP: Final = "move_drop"
ROLLED_BACK: Final = "rolled_back"

#: Actions that set an entry, and those that remove one.
SETS: Final = frozenset({WRITE, UPDATE, IMPORT})
REMOVES: Final = frozenset({DELETE, EVICT, EXPIRE, DEPLOYER_DELETE, MOVE_OUT, MOVE_DROP})
#: Actions after which the agent has no memory, and the one that creates it anew.
ENDS: Final = frozenset({DROP_AGENT, MOVE})
STARTS: Final = IMPORT_AGENT
#: Refusals: logged, change nothing.
REFUSALS: Final = frozenset({QUOTA_EXCEEDED, ACCESS_DENIED})
#: The actions the usage chart follows (the others change no bytes), in one
#: fixed order: the index's ``steps`` statement lists them as parameters.
CHART_ACTIONS: Final[tuple[str, ...]] = tuple(sorted(SETS | REMOVES | ENDS))
