"""Genes: loading (``phenotype.json``, v2 ids, the project registry) and running them.

Nothing is imported here on purpose: ``import rotifer.genes.gene`` must stay
cheap so that the CLI starts fast, and the WASM runtime (wasmtime) is imported
only when a WASM gene runs.

- :mod:`rotifer.genes.gene`      -- :class:`Gene`, :func:`load_gene`, :func:`register_gene`
- :mod:`rotifer.genes.ids`       -- the v1 and v2 id rules
- :mod:`rotifer.genes.phenotype` -- ``phenotype.json`` validation, input schemas
- :mod:`rotifer.genes.registry`  -- ``.rotifer/genes.json``
- :mod:`rotifer.genes.execute`   -- :func:`express`, dispatching by kind
- :mod:`rotifer.genes.calls`     -- a memory call from any bridge: ops, fields, errors
- :mod:`rotifer.genes.python`    -- Python genes (``ctx.memory``)
- :mod:`rotifer.genes.wasm`      -- genes that bring their own WASM
- :mod:`rotifer.genes.errors`    -- the error codes
"""
