"""``rotifer mcp`` on a PostgreSQL memory (the project's memoryUrl): two sessions as two
genes of one agent, CREATOR_GENE_ONLY between them, and the audit lines."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from .helpers import AGENT, audit, call, make_agent, refused, stdio

pytestmark = [pytest.mark.postgres, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PRIVATE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
           "sharePolicy": "PRIVATE"}


def test_two_genes_on_postgresql(tmp_path: Path, pg_fresh_url: str) -> None:
    agent = make_agent(tmp_path, url=pg_fresh_url)

    async def sessions() -> None:
        async with stdio(agent.root, AGENT, "--as", "notes") as notes, \
                stdio(agent.root, AGENT, "--as", "planner") as planner:
            assert not (await call(notes, "memory_write", {
                "key": "secret", "value": "x", "accessPolicy": PRIVATE})).error
            refused(await call(planner, "memory_read", {"key": "secret"}),
                    "MEMORY_ACCESS_DENIED")
            assert (await call(notes, "memory_search", {})).body["count"] == 1
            assert (await call(planner, "memory_search", {})).body["count"] == 0
            usage = await call(planner, "memory_usage", {"nextWriteBytes": 4096})
            assert usage.body["nextWrite"]["evictsOtherEntries"] == 1

    anyio.run(sessions)
    lines = audit(agent.root)
    assert [(line["action"], line.get("via")) for line in lines
            if line.get("key") == "secret"] == [("write", "mcp"), ("access_denied", None)]
