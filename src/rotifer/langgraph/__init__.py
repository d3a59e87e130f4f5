"""LangGraph's store on rotifer's memory (the optional extra ``rotifer[langgraph]``).

:class:`RotiferStore` is a LangGraph ``BaseStore`` bound to one agent and one
caller (a gene or the deployer): every item is a memory entry, so quota and
cleanup, access scopes, retention and the audit log hold for LangGraph graphs
as they do for genes.  See docs/langgraph.md.
"""

from .keys import ROOT, decode_value, encode_value, memory_key, namespace_prefix, parse_key
from .policy import DEFAULT_CATEGORY, NamespacePolicy
from .store import RotiferStore

__all__ = ["DEFAULT_CATEGORY", "ROOT", "NamespacePolicy", "RotiferStore", "decode_value",
           "encode_value", "memory_key", "namespace_prefix", "parse_key"]
