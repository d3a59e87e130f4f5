"""Benchmarks of the memory store against the physical floor and a peer.

``python -m bench`` (or ``make bench``) runs every comparison and rewrites the
results table in ``docs/benchmarks.md`` between its marker comments.  Each
comparison runs in this one process, interleaving the compared operations in
rounds and taking medians, so the ratios hold on a noisy machine.
"""
