"""rotifer: an agent runtime whose genes share an Agent Memory.

The package is layered, and imports point one way only::

    memory  <-  genes  <-  agents  <-  cli

``rotifer.memory`` is the store (model, policy rules, quota, retention, audit)
and knows nothing about genes or the command line.
"""

__version__ = "0.1.0"
