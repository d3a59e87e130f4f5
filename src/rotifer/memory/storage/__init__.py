"""Storage: the interface every backend implements (:mod:`.backend`: what a
backend must do, declared, nothing inherited), the row decoding and SQL both
SQL backends share (:mod:`.rows`, :mod:`.sql_text`, :mod:`.sql_transaction`,
:mod:`.index_sql`), and the backends themselves (:mod:`.sqlite`,
:mod:`.postgres`).  Nothing here knows a policy rule; the rooms above decide.

Its room in :mod:`rotifer.memory` (it imports only the vocabulary below it)::

    store > views > engine > audit > [storage] > vocabulary

Inside, one way too: ``backend`` <- ``rows``, ``sql_text``, ``index_sql`` <-
``sql_transaction`` <- ``sqlite/``, ``postgres/``.
"""

#: The environment variable that names the store's URL (``postgresql://...`` or
#: ``sqlite:PATH``), read by :meth:`MemoryStore.open
#: <rotifer.memory.store.MemoryStore.open>` and the project layer alike.
URL_VARIABLE = "ROTIFER_MEMORY_URL"
