"""Agents: projects, genomes (genes + composition), and running them.

- :mod:`rotifer.agents.project`      -- :class:`Project` (finding it, its store, its genes)
- :mod:`rotifer.agents.genome`       -- :class:`Agents`, :class:`AgentSpec`
- :mod:`rotifer.agents.compositions` -- ``seq``, ``par``, ``cond``, ``try``
- :mod:`rotifer.agents.build`        -- :func:`wrap_gene`, :func:`compile_gene`
- :mod:`rotifer.agents.run`          -- :func:`run_agent`, :func:`run_gene`
- :mod:`rotifer.agents.testing`      -- :func:`test_gene` (``rotifer test``)

Nothing heavy is imported here: wasmtime only when a WASM gene runs or is
compiled, psycopg only when a PostgreSQL memory URL is used.
"""
