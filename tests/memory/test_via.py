"""The optional ``via`` of a view (``store.for_gene(..., via="mcp")``): written into the
write, update and delete lines of its changes, on the lean path and the full one
alike; a gene's own view writes none; ``audit verify`` accepts the lines."""

from __future__ import annotations

from pathlib import Path

from rotifer.memory import MemoryStore
from rotifer.memory.audit.verify import verify_agent
from tests.audit_reading import audit_lines

from .conftest import StoreFactory

GENE = "v2:" + "a" * 64


def test_via_marks_writes_updates_and_deletes(store_factory: StoreFactory, tmp_path: Path
                                              ) -> None:
    rot = tmp_path / ".rotifer"
    store: MemoryStore = store_factory(rot)
    store.create_agent("bot", quota_bytes=64)
    mcp = store.for_gene("bot", GENE, "d", via="mcp")
    own = store.for_gene("bot", GENE, "d")
    mcp.write_memory("a", b"1", "CACHE")                    # lean path: a new entry
    mcp.write_memory("a", b"22", "CACHE")                   # lean path: an update
    mcp.write_memory("p", b"x", "PREFERENCE", {"readScope": "SAME_DOMAIN",  # full path
                     "writeScope": "SAME_DOMAIN", "sharePolicy": "PRIVATE"})
    own.write_memory("b", b"3", "CACHE")
    mcp.write_memory("c", b"y" * 50, "CACHE")               # full path: evicts to fit
    mcp.delete_memory("p")
    own.delete_memory("c")
    seen = [(line["action"], line["key"], line.get("via")) for line in audit_lines(rot)
            if line["action"] in ("write", "update", "delete", "evict")]
    assert seen[:4] == [("write", "a", "mcp"), ("update", "a", "mcp"), ("write", "p", "mcp"),
                        ("write", "b", None)]
    assert ("write", "c", "mcp") in seen and ("delete", "p", "mcp") in seen
    assert ("delete", "c", None) in seen
    assert all(via is None for action, _, via in seen if action == "evict")
    assert verify_agent(store, "bot").ok
