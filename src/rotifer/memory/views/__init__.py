"""The views on an agent's memory.

The gene's (:mod:`.gene_memory`): :class:`~.gene_view.GeneView` (who acts,
the lean paths' "take the full path") with its reads (:mod:`.gene_reads`:
read, query, pick) and writes (:mod:`.gene_writes`: write, delete, the
cleanup), each full path with its lean twin beside it.  The deployer's
(:mod:`.deployer_memory`, :mod:`.browse`), and the helpers built on them
(:mod:`.scan`, :mod:`.untrusted`).  A view holds the engine
(:class:`~rotifer.memory.engine.core.Engine`), never the store.

Its room in :mod:`rotifer.memory`::

    store > [views] > engine > audit > storage > vocabulary

Inside: ``gene_view`` <- ``gene_reads``, ``gene_writes`` <- ``gene_memory``
<- ``untrusted``; ``scan`` <- ``gene_reads``, ``deployer_memory``.
"""
