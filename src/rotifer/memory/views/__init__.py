"""The views on an agent's memory: the gene's (:mod:`.gene_memory`, with its
fast paths in :mod:`.lean`), the deployer's (:mod:`.deployer_memory`,
:mod:`.browse`), and the readers built on them (:mod:`.scan`,
:mod:`.untrusted`).
"""
