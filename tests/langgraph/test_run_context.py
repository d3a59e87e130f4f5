"""Each audit line of a change made through the store names the LangGraph
thread and run it came from (issue 32): sync and async graphs, concurrent
threads apart in one gathered batch, none outside a graph; ``audit show``
prints them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

from langgraph.config import get_store
from langgraph.graph import START, StateGraph

from rotifer.langgraph import RotiferStore
from rotifer.memory import MemoryStore
from rotifer.memory.audit.verify import verify_agent
from tests.audit_reading import project_audit
from tests.cli.helpers import add_gene, init_project, ok, wrap
from tests.cli.test_memory_cli import MEMO


class State(TypedDict):
    n: int


def remember(state: State) -> State:
    get_store().put(("notes",), f"sync{state['n']}", {"n": state["n"]})
    return state


async def aremember(state: State) -> State:
    await get_store().aput(("notes",), f"async{state['n']}", {"n": state["n"]})
    return state


def graph(store: RotiferStore, node: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", node)
    builder.add_edge(START, "remember")
    return builder.compile(store=store)


def contexts(root: Path) -> dict[str, Any]:
    lines = project_audit(root)
    return {line["key"]: line.get("context") for line in lines if line["action"] == "write"}


def test_audit_lines_name_thread_and_run(tmp_path: Path) -> None:
    root = init_project(tmp_path / "proj")
    add_gene(root, "memo", MEMO, domain="memo")
    gene = wrap(root, "memo")
    ok(root, "agent", "create", "bot", "--genes", "memo")
    memory = MemoryStore.open(root / ".rotifer")
    try:
        store = RotiferStore.for_gene(memory, "bot", gene, "memo")
        graph(store, remember).invoke({"n": 1}, {"configurable": {"thread_id": "t-sync"}})

        async def two_threads() -> None:
            app = graph(store, aremember)
            await asyncio.gather(app.ainvoke({"n": 2}, {"configurable": {"thread_id": "t-a"}}),
                                 app.ainvoke({"n": 3}, {"configurable": {"thread_id": "t-b"}}))

        asyncio.run(two_threads())
        store.put(("notes",), "outside", {"n": 0})
        found = contexts(root)
        assert {key: (c or {}).get("thread_id") for key, c in found.items()} == {
            "langgraph/notes/sync1": "t-sync", "langgraph/notes/async2": "t-a",
            "langgraph/notes/async3": "t-b", "langgraph/notes/outside": None}
        runs = {found[f"langgraph/notes/{k}"]["run_id"] for k in ("sync1", "async2", "async3")}
        assert len(runs) == 3 and all(len(run) == 36 for run in runs)  # three runs, uuids
        assert verify_agent(memory, "bot").ok
    finally:
        memory.close()
    shown = ok(root, "agent", "audit", "show", "bot", "--key", "langgraph/notes/async3")
    assert "thread t-b run " in shown


def test_the_console_timeline_shows_them_escaped(tmp_path: Path) -> None:
    from rotifer.memory.context import audit_context
    from tests.console.helpers import Served, make_project

    served = Served(make_project(tmp_path / "proj"))
    try:
        gene = next(iter(served.project.registry().entries()))
        with served.project.open_store("ag") as memory, \
                audit_context({"thread_id": "<b>t-console</b>", "run_id": "r-9"}):
            memory.for_gene("ag", gene, "notes").write_memory("ctx/run", b"v", "CONTEXT")
        page = served.get("/agents/ag/history?key=ctx/run").text
        assert "thread &lt;b&gt;t-console&lt;/b&gt; run r-9" in page
        assert "<b>t-console" not in page
    finally:
        served.stop()
