"""The engine: how a change is made -- its audit lines appended, indexed and
committed, or rolled back (:mod:`.changes`) -- shared by the views above it.
"""
