"""The engine: how a change is made, shared by the views above it.

:mod:`.core` is :class:`~.core.Engine`: one write transaction per change on
the agent, expired entries purged first, the change timed and numbered, its
audit lines appended before the commit, refusals audited; the cheap questions
a call asks first.  :mod:`.changes` is a change itself: its lines, the
write-ahead append, and settling one that did not commit.

Its room in :mod:`rotifer.memory`::

    store > views > [engine] > audit > storage > vocabulary

(``core`` imports ``changes``; neither imports a view or the store: the store
is an engine, with the agents' lives and the views on top.)
"""
