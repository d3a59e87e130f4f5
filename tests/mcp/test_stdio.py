"""``rotifer mcp`` over stdio, driven by the MCP SDK's own client (a real subprocess):
the tools and resources listed, every tool on success and on each refusal, two
sessions as two genes of one agent, and the audit lines."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio
import pytest

from rotifer.mcp.server import resource_uri

from .helpers import AGENT, Agent, audit, call, make_agent, refused, stdio

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PRIVATE = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
           "sharePolicy": "PRIVATE"}


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return make_agent(tmp_path)


def test_every_tool_on_success_with_its_audit_lines(agent: Agent) -> None:
    async def session() -> None:
        async with stdio(agent.root, AGENT, "--as", "notes") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert sorted(tools) == ["memory_delete", "memory_read", "memory_search",
                                     "memory_usage", "memory_write"]
            write = tools["memory_write"]
            for said in ("PREFERENCE", "MEMORY_QUOTA_EXCEEDED", "1 MiB", "CACHE"):
                assert said in (write.description or ""), said
            assert write.input_schema["properties"]["category"]["enum"] == [
                "PREFERENCE", "PATTERN", "CONTEXT", "CACHE"]

            done = await call(client, "memory_write", {"key": "notes/today", "value": "héllo"})
            assert not done.error and done.body["entry"]["category"] == "CACHE"
            binary = bytes([0, 255, 254, 10])
            done = await call(client, "memory_write", {
                "key": "notes/blob", "value": base64.b64encode(binary).decode(),
                "encoding": "base64"})
            assert not done.error

            read = await call(client, "memory_read", {"key": "notes/today"})
            assert read.body["entry"]["value"] == "héllo"
            assert read.body["entry"]["encoding"] == "text"
            blob = await call(client, "memory_read", {"key": "notes/blob"})
            assert blob.body["entry"]["encoding"] == "base64"
            assert base64.b64decode(blob.body["entry"]["value"]) == binary
            missing = await call(client, "memory_read", {"key": "notes/none"})
            assert not missing.error and missing.body == {"entry": None}

            found = await call(client, "memory_search", {"keyPrefix": "notes/", "limit": 10})
            assert [e["key"] for e in found.body["entries"]] == ["notes/blob", "notes/today"]
            assert (await call(client, "memory_search", {"category": "PATTERN"})).body[
                "count"] == 0
            later = await call(client, "memory_search", {
                "since": found.body["entries"][0]["updatedAt"]})
            assert [e["key"] for e in later.body["entries"]] == ["notes/blob"]

            usage = await call(client, "memory_usage", {"nextWriteBytes": 4096})
            assert usage.body["quotaBytes"] == 4096
            assert usage.body["byCategory"]["CACHE"]["entries"] == 2
            assert usage.body["nextWrite"]["fits"] is True
            assert {e["key"] for e in usage.body["nextWrite"]["evicts"]} == {
                "notes/today", "notes/blob"}

            resources = (await client.list_resources()).resources
            assert {str(r.uri) for r in resources} == {
                resource_uri(AGENT, "notes/today"), resource_uri(AGENT, "notes/blob")}
            text = await client.read_resource(resource_uri(AGENT, "notes/today"))
            assert getattr(text.contents[0], "text", None) == "héllo"
            raw = await client.read_resource(resource_uri(AGENT, "notes/blob"))
            assert base64.b64decode(getattr(raw.contents[0], "blob", "")) == binary

            gone = await call(client, "memory_delete", {"key": "notes/today"})
            assert not gone.error and gone.body == {"deleted": "notes/today"}

    anyio.run(session)
    lines = [line for line in audit(agent.root) if line.get("agent") == AGENT
             and line["action"] in ("write", "delete")]
    assert [(line["action"], line["key"], line.get("via")) for line in lines] == [
        ("write", "notes/today", "mcp"), ("write", "notes/blob", "mcp"),
        ("delete", "notes/today", "mcp")]
    assert {line["actor"] for line in lines} == {agent.ids["notes"]}


def test_every_refusal_is_a_tool_error_with_the_memorys_code(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, quota="1KB")

    async def session() -> None:
        async with stdio(agent.root, AGENT, "--as", "notes") as client:
            # the write policy: untrusted input goes to CACHE only
            said = refused(await call(client, "memory_write", {
                "key": "p", "value": "x", "category": "PREFERENCE"}), "MEMORY_ACCESS_DENIED")
            assert "--allow-preference" in said
            refused(await call(client, "memory_write", {
                "key": "c", "value": "x", "category": "CONTEXT"}), "MEMORY_ACCESS_DENIED")
            # the data policy and the scopes, judged by the memory (no anonymization here)
            for policy in ({"readScope": "ALL_GENES", "writeScope": "ALL_GENES",
                            "sharePolicy": "ANONYMIZED_SHARE"},
                           {"readScope": "DEPLOYER_CONFIGURED", "writeScope": "SAME_DOMAIN",
                            "sharePolicy": "PRIVATE"}):
                refused(await call(client, "memory_write", {
                    "key": "shared", "value": "x", "accessPolicy": policy}),
                    "MEMORY_ACCESS_DENIED")
            # size and quota
            refused(await call(client, "memory_write", {"key": "k" * 1025, "value": "x"}),
                    "MEMORY_INVALID_INPUT")
            said = refused(await call(client, "memory_write", {
                "key": "huge", "value": "x" * (1024 * 1024 + 1)}), "MEMORY_INVALID_INPUT")
            assert "1 MiB" in said
            refused(await call(client, "memory_write", {"key": "big", "value": "x" * 2000}),
                    "MEMORY_QUOTA_EXCEEDED")
            usage = await call(client, "memory_usage", {"nextWriteBytes": 5000})
            assert usage.body["nextWrite"] == {
                "bytes": 5000, "fits": False, "evicts": [], "evictsOtherEntries": 0,
                "evictsOtherBytes": 0, "error": "MEMORY_QUOTA_EXCEEDED"}
            # invalid input, each with the memory's code
            for tool, args in [
                ("memory_write", {"key": "a", "value": "%%%", "encoding": "base64"}),
                ("memory_write", {"key": "a", "value": "x", "encoding": "hex"}),
                ("memory_write", {"key": "a", "value": 5}),
                ("memory_write", {"key": "a", "value": "x", "category": "NOPE"}),
                ("memory_write", {"key": "a", "value": "x", "accessPolicy": {"readScope": "X"}}),
                ("memory_read", {}),
                ("memory_read", {"key": 7}),
                ("memory_read", {"key": "a", "extra": 1}),
                ("memory_search", {"limit": 0}),
                ("memory_search", {"limit": 1001}),
                ("memory_search", {"since": "yesterday"}),
                ("memory_usage", {"nextWriteBytes": -1}),
                ("memory_nothing", {}),
            ]:
                refused(await call(client, tool, args), "MEMORY_INVALID_INPUT")
            refused(await call(client, "memory_delete", {"key": "absent"}), "MEMORY_NOT_FOUND")
            # the server is still there after every refusal
            assert not (await call(client, "memory_write", {"key": "ok", "value": "1"})).error

    anyio.run(session)
    denied = [line for line in audit(agent.root) if line["action"] == "access_denied"]
    assert [(line["key"], line.get("via")) for line in denied] == [
        ("p", "mcp"), ("c", "mcp"), ("shared", None), ("shared", None)]
    assert [line["action"] for line in audit(agent.root)
            if line["action"] == "quota_exceeded"] == ["quota_exceeded"]


def test_two_sessions_as_two_genes_keep_creator_gene_only_apart(agent: Agent) -> None:
    async def sessions() -> None:
        async with stdio(agent.root, AGENT, "--as", "notes") as notes, \
                stdio(agent.root, AGENT, "--as", "planner") as planner:
            mine = await call(notes, "memory_write", {
                "key": "secret", "value": "only notes", "accessPolicy": PRIVATE})
            assert not mine.error
            shared = await call(notes, "memory_write", {"key": "shared", "value": "both"})
            assert not shared.error
            refused(await call(planner, "memory_read", {"key": "secret"}),
                    "MEMORY_ACCESS_DENIED")
            refused(await call(planner, "memory_write", {"key": "secret", "value": "mine now"}),
                    "MEMORY_ACCESS_DENIED")
            refused(await call(planner, "memory_delete", {"key": "secret"}),
                    "MEMORY_ACCESS_DENIED")
            assert (await call(planner, "memory_read", {"key": "shared"})).body["entry"][
                "value"] == "both"
            found = await call(planner, "memory_search", {})
            assert [e["key"] for e in found.body["entries"]] == ["shared"]
            # resources never show (or read) a value the gene may not read
            listed = {str(r.uri) for r in (await planner.list_resources()).resources}
            assert listed == {resource_uri(AGENT, "shared")}
            with pytest.raises(Exception, match="MEMORY_ACCESS_DENIED"):
                await planner.read_resource(resource_uri(AGENT, "secret"))
            # the usage summary counts the entry it may not read, without its key
            usage = await call(planner, "memory_usage", {"nextWriteBytes": 4090})
            assert [e["key"] for e in usage.body["nextWrite"]["evicts"]] == ["shared"]
            assert usage.body["nextWrite"]["evictsOtherEntries"] == 1
            assert (await call(notes, "memory_read", {"key": "secret"})).body["entry"][
                "value"] == "only notes"

    anyio.run(sessions)
    denied = [line for line in audit(agent.root) if line["action"] == "access_denied"]
    assert {line["actor"] for line in denied} == {agent.ids["planner"]}
    assert len(denied) == 4  # read, write, delete, resource read


def test_the_deployer_reads_and_deletes_anything_and_writes_nothing(agent: Agent) -> None:
    async def sessions() -> None:
        async with stdio(agent.root, AGENT, "--as", "notes") as notes:
            await call(notes, "memory_write", {"key": "secret", "value": "x",
                                               "accessPolicy": PRIVATE})
        async with stdio(agent.root, AGENT, "--deployer") as owner:
            tools = [t.name for t in (await owner.list_tools()).tools]
            assert "memory_write" not in tools
            refused(await call(owner, "memory_write", {"key": "k", "value": "v"}),
                    "MEMORY_INVALID_INPUT")  # no such tool here
            assert (await call(owner, "memory_read", {"key": "secret"})).body["entry"][
                "value"] == "x"
            assert (await call(owner, "memory_search", {"keyPrefix": "sec"})).body["count"] == 1
            assert [str(r.uri) for r in (await owner.list_resources()).resources] == [
                resource_uri(AGENT, "secret")]
            assert not (await call(owner, "memory_delete", {"key": "secret"})).error
            refused(await call(owner, "memory_delete", {"key": "secret"}), "MEMORY_NOT_FOUND")

    anyio.run(sessions)
    assert [line["action"] for line in audit(agent.root)
            if line.get("key") == "secret"] == ["write", "deployer_delete"]


def test_the_flags_open_more_categories(agent: Agent) -> None:
    async def sessions() -> None:
        async with stdio(agent.root, AGENT, "--as", "notes", "--retention-days", "7") as c:
            done = await call(c, "memory_write", {"key": "ctx", "value": "x",
                                                  "category": "CONTEXT"})
            assert done.body["entry"]["retentionPolicy"]["maxRetentionDays"] == 7
            refused(await call(c, "memory_write", {"key": "p", "value": "x",
                                                   "category": "PREFERENCE"}),
                    "MEMORY_ACCESS_DENIED")
        async with stdio(agent.root, AGENT, "--as", "notes", "--allow-preference") as c:
            done = await call(c, "memory_write", {"key": "p", "value": "x",
                                                  "category": "PREFERENCE"})
            assert not done.error and done.body["entry"]["retentionPolicy"] is None

    anyio.run(sessions)


def test_a_gene_the_agent_does_not_run_is_refused_at_start(agent: Agent) -> None:
    from tests.cli.helpers import refused as cli_refused

    cli_refused(agent.root, "GENE_NOT_FOUND", "mcp", AGENT, "--as", "outsider")
    cli_refused(agent.root, "AGENT_NOT_FOUND", "mcp", "nobody", "--as", "notes")
    cli_refused(agent.root, "USAGE_ERROR", "mcp", AGENT)
    cli_refused(agent.root, "USAGE_ERROR", "mcp", AGENT, "--as", "notes", "--deployer")


def test_a_memory_gone_under_the_server_is_a_tool_error_not_a_crash(agent: Agent) -> None:
    from tests.cli.helpers import ok

    async def session() -> None:
        async with stdio(agent.root, AGENT, "--as", "notes") as client:
            assert not (await call(client, "memory_write", {"key": "k", "value": "v"})).error
            ok(agent.root, "agent", "delete", AGENT, "--memory-only", "--yes")
            for tool, args in [("memory_write", {"key": "k", "value": "v"}),
                               ("memory_delete", {"key": "k"}),
                               ("memory_usage", {})]:
                said = refused(await call(client, tool, args), "MEMORY_STORAGE_ERROR")
                assert "Traceback" not in said
            assert len((await client.list_tools()).tools) == 5  # still serving

    anyio.run(session)


def test_resources_are_listed_in_pages(tmp_path: Path) -> None:
    from rotifer.agents.acting import gene_memory
    from rotifer.agents.project import Project

    agent = make_agent(tmp_path, quota="1MB")
    project = Project(agent.root)
    with project.open_store(AGENT, create=False) as store:
        memory = gene_memory(project, store, AGENT, "notes")
        for i in range(150):
            memory.write_memory(f"k/{i:03d}", b"v", "CACHE")

    async def session() -> None:
        async with stdio(agent.root, AGENT, "--as", "planner") as client:
            first = await client.list_resources()
            assert len(first.resources) == 100 and first.next_cursor is not None
            assert first.resources[0].name == "k/149"  # newest first
            second = await client.list_resources(cursor=first.next_cursor)
            assert len(second.resources) == 50 and second.next_cursor is None
            names = {r.name for r in [*first.resources, *second.resources]}
            assert names == {f"k/{i:03d}" for i in range(150)}
            with pytest.raises(Exception, match="MEMORY_INVALID_INPUT"):
                await client.list_resources(cursor="not-a-cursor")
            with pytest.raises(Exception, match="MEMORY_INVALID_INPUT"):
                await client.read_resource("rotifer://other-agent/k/001")
            with pytest.raises(Exception, match="MEMORY_NOT_FOUND"):
                await client.read_resource(resource_uri(AGENT, "k/none"))

    anyio.run(session)
