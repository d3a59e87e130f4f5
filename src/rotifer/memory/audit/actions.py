"""The audit log's action names (the ``action`` field of every line), one constant each.

What each means is the table in :mod:`rotifer.memory.audit`; the groups below
are how a reader replays them (:mod:`.replay`, the console's chart).  Adding
an action: a constant here, a row in that table, and the group it belongs to.
"""

from __future__ import annotations

from typing import Final

from ..model import Category

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


#: What a chart step does, as a small number (so 100,000 rows come back without
#: two strings each): a set into the category of that position in ``Category``,
#: :data:`UNKNOWN` a set into no known category, :data:`ENDED` the memory's
#: end, :data:`REMOVED` plus the position in :data:`REMOVE_ACTIONS` a removal.
CATEGORY_CODES: Final[dict[str, int]] = {c.value: n for n, c in enumerate(Category)}
UNKNOWN: Final = -1
ENDED: Final = len(CATEGORY_CODES)
REMOVED: Final = len(CATEGORY_CODES) + 1
REMOVE_ACTIONS: Final[tuple[str, ...]] = tuple(sorted(REMOVES))


def step_code(action: object, category: object) -> int | None:
    """The code of a line with this action and category (``None``: not followed)."""
    if action in ENDS:
        return ENDED
    if action in REMOVES:
        return REMOVED + REMOVE_ACTIONS.index(str(action))
    if action in SETS:
        return CATEGORY_CODES.get(category, UNKNOWN) if isinstance(category, str) else UNKNOWN
    return None
