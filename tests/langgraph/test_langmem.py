"""LangMem's memory tools end to end on rotifer's store (issue 32):
``create_manage_memory_tool`` creates, updates and deletes memories and
``create_search_memory_tool`` finds them by semantic search -- with
deterministic letter-count embeddings, no model -- as a gene, every change an
audited memory write, on SQLite and PostgreSQL; in a graph too, with the
namespace's ``{user_id}`` filled from the config."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest

langmem = pytest.importorskip("langmem")

from langgraph.graph import START, StateGraph  # noqa: E402

from rotifer.langgraph import RotiferStore  # noqa: E402
from rotifer.memory import MemoryStore  # noqa: E402
from rotifer.memory.audit.verify import verify_agent  # noqa: E402
from tests.memory.conftest import StoreFactory  # noqa: E402
from tests.memory.helpers import audit_lines, gene_id  # noqa: E402

from .test_semantic import DIMS, embed  # noqa: E402

GENE = gene_id("langmem")


@pytest.fixture
def rot(tmp_path: Path) -> Path:
    return tmp_path / ".rotifer"


@pytest.fixture
def store(store_factory: StoreFactory, rot: Path) -> RotiferStore:
    memory: MemoryStore = store_factory(rot)
    memory.create_agent("bot")
    return RotiferStore.for_gene(memory, "bot", GENE, "assistant",
                                 index={"embed": embed, "dims": DIMS})


def test_manage_and_search_tools(store: RotiferStore, rot: Path) -> None:
    manage = langmem.create_manage_memory_tool(("memories", "ann"), store=store)
    search = langmem.create_search_memory_tool(("memories", "ann"), store=store)
    for text in ("apple pie", "zzz zebra buzz", "cherry tart"):
        assert "created memory" in manage.invoke({"content": text, "action": "create"})
    found = json.loads(search.invoke({"query": "zzzz zebra"}))
    assert found[0]["value"]["content"] == "zzz zebra buzz"
    assert found[0]["score"] is not None
    memory_id = found[0]["key"]
    manage.invoke({"content": "bbb bee", "action": "update", "id": memory_id})
    assert json.loads(search.invoke({"query": "bbbb"}))[0]["value"]["content"] == "bbb bee"
    manage.invoke({"action": "delete", "id": memory_id})
    assert all(hit["key"] != memory_id
               for hit in json.loads(search.invoke({"query": "bbbb", "limit": 10})))
    actions = [(line["action"], line["key"].startswith("langgraph/memories/ann/"))
               for line in audit_lines(rot) if line["key"] and "vectors" not in line["key"]]
    assert actions == [("write", True)] * 3 + [("update", True), ("delete", True)]
    assert verify_agent(store.caller.memory.store, "bot").ok  # type: ignore[attr-defined]


def test_tools_in_a_graph_async(store: RotiferStore) -> None:
    class State(TypedDict):
        text: str
        found: Any

    manage = langmem.create_manage_memory_tool(("memories", "{user_id}"))
    search = langmem.create_search_memory_tool(("memories", "{user_id}"))

    async def remember(state: State) -> dict[str, Any]:
        await manage.ainvoke({"content": state["text"], "action": "create"})
        return {"found": await search.ainvoke({"query": state["text"]})}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    app = builder.compile(store=store)

    async def run() -> list[Any]:
        return list(await asyncio.gather(*(
            app.ainvoke({"text": t, "found": None}, {"configurable": {"user_id": u}})
            for u, t in (("ann", "apple pie"), ("bob", "zzz zebra")))))

    ann, bob = asyncio.run(run())
    assert json.loads(ann["found"])[0]["value"]["content"] == "apple pie"
    assert [hit["value"]["content"] for hit in json.loads(bob["found"])] == ["zzz zebra"]
    assert store.list_namespaces() == [("memories", "ann"), ("memories", "bob")]
