"""A small LangGraph StateGraph (no language model) whose nodes keep a user's
preferences in an agent's rotifer memory, through rotifer.langgraph.RotiferStore.

    python graph.py --agent assistant --gene prefs --user alice --set theme=dark
    python graph.py --agent assistant --gene prefs --user alice   # remembers "dark"

recall -> remember -> reply: `recall` reads the user's preferences from the
store, `remember` merges the ones given with --set and puts them back (a
PREFERENCE entry: never cleared for room), `reply` answers with them and
caches its answer (a CACHE entry: cleared first when memory is full).  The
graph acts as the gene named by --gene, with that gene's v2 id (it must be
wrapped: `rotifer wrap prefs`) and domain, so the agent's scopes, quota,
retention and audit log apply to every put.  Run from inside the project (or
give --project).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from rotifer.agents.acting import acting_gene
from rotifer.agents.project import Project
from rotifer.genes.errors import RotiferError
from rotifer.langgraph import RotiferStore
from rotifer.memory import MemoryError, MemoryStore


class State(TypedDict, total=False):
    user: str
    updates: dict[str, str]
    preferences: dict[str, Any]
    reply: str


def recall(state: State, runtime: Runtime[None]) -> State:
    assert runtime.store is not None
    item = runtime.store.get(("users", state["user"]), "preferences")
    return {"preferences": item.value if item else {}}


def remember(state: State, runtime: Runtime[None]) -> State:
    assert runtime.store is not None
    if not state.get("updates"):
        return {}
    merged = {**state.get("preferences", {}), **state["updates"]}
    runtime.store.put(("users", state["user"]), "preferences", merged)
    return {"preferences": merged}


def reply(state: State, runtime: Runtime[None]) -> State:
    assert runtime.store is not None
    prefs = state.get("preferences") or {}
    said = ", ".join(f"{k}={v}" for k, v in sorted(prefs.items())) or "nothing yet"
    text = f"Hello {state['user']}: I remember {said}."
    runtime.store.put(("replies", state["user"]), "last", {"text": text})
    return {"reply": text}


def build() -> StateGraph[State, None, State, State]:
    graph = StateGraph(State)
    graph.add_node("recall", recall)
    graph.add_node("remember", remember)
    graph.add_node("reply", reply)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "remember")
    graph.add_edge("remember", "reply")
    graph.add_edge("reply", END)
    return graph


def open_store(project: Path, agent: str, gene_name: str, memory: MemoryStore) -> RotiferStore:
    """The store acting as the agent's wrapped gene ``gene_name`` (resolved as ``rotifer
    agent run`` and ``rotifer mcp`` resolve it: rotifer.agents.acting)."""
    gene = acting_gene(Project(project), agent, gene_name)
    return RotiferStore.for_gene(memory, agent, gene.v2_id, gene.domain,
                                 namespaces={("users",): "PREFERENCE", ("replies",): "CACHE"})


def find_project(start: Path) -> Path:
    for folder in (start, *start.parents):
        if (folder / ".rotifer").is_dir():
            return folder
    raise SystemExit(f"PROJECT_NOT_FOUND: no .rotifer/ in {start} or above (rotifer init)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=None)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--gene", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    updates = dict(item.split("=", 1) for item in args.set if "=" in item)
    project = (args.project or find_project(Path.cwd())).resolve()
    try:
        with MemoryStore.open(project / ".rotifer", create=False) as memory:
            app = build().compile(store=open_store(project, args.agent, args.gene, memory))
            result = app.invoke({"user": args.user, "updates": updates})
    except (MemoryError, RotiferError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps({"reply": result["reply"], "preferences": result["preferences"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
