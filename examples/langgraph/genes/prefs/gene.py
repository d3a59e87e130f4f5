"""The gene the LangGraph graph acts as (graph.py), usable on its own too: it
reads the preferences the graph keeps, through its own ctx.memory.

The graph's items are memory entries whose keys follow rotifer.langgraph's
mapping: ("users", USER) / "preferences" is "langgraph/users/USER/preferences"
(docs/langgraph.md).  A user name with "/" or "%" would be escaped; this
example keeps to plain names.
"""

import json


def express(input, ctx):
    user = input["user"]
    entry = ctx.memory.read_memory(f"langgraph/users/{user}/preferences")
    return {"user": user, "preferences": json.loads(entry.value) if entry else {}}
