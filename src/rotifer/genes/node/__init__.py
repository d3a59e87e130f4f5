"""Genes on Node.js: ``genes/NAME/index.ts`` or ``index.js``.

The gene runs in a child ``node`` process (:mod:`rotifer.genes.node.runner`
is ``runner.js`` beside this file); its ``ctx.memory`` calls come back to this
process over a synchronous pipe bridge and are served by the gene's
:class:`~rotifer.memory.GeneMemoryAccess`, so the very same rules, quota and
audit apply as for a Python gene.  See docs/node.md.
"""

from .bridge import (
    MIN_NODE_MAJOR,
    TYPES_DIR,
    find_node,
    install_types,
    node_modules_dir,
    run_node_gene,
)

__all__ = ["MIN_NODE_MAJOR", "TYPES_DIR", "find_node", "install_types", "node_modules_dir",
           "run_node_gene"]
