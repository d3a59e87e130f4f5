"""The ``rotifer`` command (click).

- :mod:`rotifer.cli.entry`    -- the console script (Ctrl-C during start-up)
- :mod:`rotifer.cli.main`     -- the group, error reporting, ``init``, ``wrap``,
  ``compile``, ``run``, ``test``
- :mod:`rotifer.cli.agent`    -- ``agent create | list | run | update-genes``
- :mod:`rotifer.cli.memory`   -- ``agent memory list | delete``
- :mod:`rotifer.cli.transfer` -- ``agent move | export | import``
- :mod:`rotifer.cli.importing` -- what ``agent import`` does (the spec and the
  history an export carries)
- :mod:`rotifer.cli.delete`   -- ``agent delete``
- :mod:`rotifer.cli.lazy`     -- the groups' subcommands, imported when named
- :mod:`rotifer.cli.common`   -- what the commands share (finding the project,
  reading ``--input``, printing tables and hints)

Commands import the layers below them inside their bodies, so that
``rotifer agent memory list`` does not pay for wasmtime or psycopg.
"""
