"""``rotifer console``: a deployer's pages over a project's agents and their memory.

A room of its own above :mod:`rotifer.memory` and :mod:`rotifer.agents` (beside
the CLI): it reads through the store's and the audit's public functions and
writes nothing but what ``agent memory delete`` and ``audit verify`` write.
Starlette routes (:mod:`.app`) behind one guard (:mod:`.security`), served by
uvicorn (:mod:`.server`); server-rendered, autoescaped Jinja2 templates and a
vendored htmx (``static/htmx.min.js``, see ``static/VENDORED.md``).  Never
shows a value.
"""
