"""The tools' results and argument checks, called in process on a real SQLite store:
``entry_json`` (built directly, for speed) is the seed's ``MemoryEntry.to_json``
field for field and in its order, plus the value as text or base64 and its
bytes; each refusal of the argument check names what is wrong."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.agents.project import Project
from rotifer.mcp.acting import Acting, WritePolicy, entry_json
from rotifer.mcp.run import opened
from rotifer.mcp.tools import ToolSpec, call, tool_specs
from rotifer.memory.errors import AgentMemoryError
from rotifer.memory.model import AccessPolicy, MemoryEntry, RetentionPolicy, Scope

from .helpers import AGENT, make_agent


@pytest.fixture
def acting(tmp_path: Path) -> Iterator[Acting]:
    agent = make_agent(tmp_path, quota="64KB")
    with opened(Project(agent.root), AGENT, "notes", WritePolicy(retention_days=3)) as acting:
        yield acting


@pytest.fixture
def specs(acting: Acting) -> dict[str, ToolSpec]:
    return {s.name: s for s in tool_specs(acting, WritePolicy(retention_days=3))}


def _as_seed(entry: MemoryEntry, *, with_value: bool) -> dict[str, object]:
    """What entry_json must equal: the seed's form, then the value, encoding and bytes."""
    seed = entry.to_json(include_value=False)
    if with_value:
        try:
            seed.update(value=entry.value.decode("utf-8"), encoding="text")
        except UnicodeDecodeError:
            seed.update(value=base64.b64encode(entry.value).decode(), encoding="base64")
    seed["bytes"] = entry.size
    return seed


@pytest.mark.parametrize("value", [b"h\xc3\xa9llo", b"\xff\x00binary"])
def test_entry_json_is_the_seed_form_key_for_key_in_order(
        acting: Acting, specs: dict[str, ToolSpec], value: bytes) -> None:
    private = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
               "sharePolicy": "PRIVATE"}
    written = acting.write("k", value, "CONTEXT", private)
    assert written.retention_policy is not None  # the server's retention: not null here
    assert written.access_policy == AccessPolicy(Scope.CREATOR_GENE_ONLY,
                                                 Scope.CREATOR_GENE_ONLY)
    read = acting.read("k", None)
    assert read is not None
    for entry, with_value in ((written, False), (read, True)):
        built = entry_json(entry, with_value=with_value)
        seed = _as_seed(entry, with_value=with_value)
        assert list(built.items()) == list(seed.items())
    plain = MemoryEntry.from_json({**read.to_json(), "retentionPolicy": None})
    assert list(entry_json(plain).items()) == list(_as_seed(plain, with_value=True).items())
    assert entry_json(plain)["retentionPolicy"] is None
    assert RetentionPolicy(3).to_json() == entry_json(read)["retentionPolicy"]
    # and the tools answer it
    answer = call(acting, specs, "memory_read", {"key": "k"})
    assert answer == {"entry": entry_json(read)}


@pytest.mark.parametrize(("tool", "args", "said"), [
    ("memory_read", {"key": "k", "extra": 1, "more": 2},
     "memory_read takes no argument(s) extra, more"),
    ("memory_read", {"category": "CACHE"}, "memory_read needs the argument(s) key"),
    ("memory_write", {"key": "k"}, "memory_write needs the argument(s) value"),
    ("memory_write", {}, "memory_write needs the argument(s) key, value"),
    ("memory_delete", {"key": "k", "value": "x"}, "memory_delete takes no argument(s) value"),
    ("memory_read", ["k"], "the arguments must be an object"),
    ("memory_nothing", {}, "no tool 'memory_nothing' here"),
])
def test_each_argument_refusal_says_what_is_wrong(
        acting: Acting, specs: dict[str, ToolSpec], tool: str, args: object,
        said: str) -> None:
    with pytest.raises(AgentMemoryError) as caught:
        call(acting, specs, tool, args)  # type: ignore[arg-type]
    assert caught.value.code.value == "MEMORY_INVALID_INPUT"
    assert said in caught.value.message


def test_absent_arguments_are_an_empty_object(acting: Acting,
                                              specs: dict[str, ToolSpec]) -> None:
    assert call(acting, specs, "memory_search", None) == {"entries": [], "count": 0}
