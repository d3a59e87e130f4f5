"""Every string a Python gene hands to a memory call -- keys, categories, the
fields of policies and filters, their names -- may hold a lone surrogate
(``"\\udc80"``, which no UTF-8 encoder takes): each call refuses it with
MEMORY_INVALID_INPUT, never a GENE_FAILED UnicodeEncodeError from below.  A
real Python gene, run by a real agent on a real SQLite store."""

from __future__ import annotations

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent
from tests.genes.helpers import write_gene

GENE = r'''
from rotifer.memory import MemoryError

S = "\udc80"
POLICY = {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN", "sharePolicy": "PRIVATE"}


def express(input, ctx):
    m = ctx.memory
    m.write_memory("ok", b"v", "CONTEXT")
    calls = {
        "read key": lambda: m.read_memory(S),
        "read key inside": lambda: m.read_memory("o" + S + "k"),
        "read category": lambda: m.read_memory("ok", S),
        "write key": lambda: m.write_memory(S, b"v", "CONTEXT"),
        "write category": lambda: m.write_memory("k", b"v", S),
        "write readScope": lambda: m.write_memory("k", b"v", "CONTEXT", {**POLICY, "readScope": S}),
        "write writeScope": lambda: m.write_memory("k", b"v", "CONTEXT", {**POLICY, "writeScope": S}),
        "write sharePolicy": lambda: m.write_memory("k", b"v", "CONTEXT", {**POLICY, "sharePolicy": S}),
        "write policy field": lambda: m.write_memory("k", b"v", "CONTEXT", {**POLICY, S: 1}),
        "write retention field": lambda: m.write_memory("k", b"v", "CONTEXT", None, {S: 1}),
        "query keyPrefix": lambda: m.query_memory({"keyPrefix": S}),
        "query keyPrefix inside": lambda: m.query_memory({"keyPrefix": "o" + S}),
        "query keyPrefix NUL": lambda: m.query_memory({"keyPrefix": "o\x00"}),
        "query category": lambda: m.query_memory({"category": S}),
        "query since": lambda: m.query_memory({"since": S}),
        "query until": lambda: m.query_memory({"until": "2026-01-01T00:00:00Z" + S}),
        "query field": lambda: m.query_memory({S: 1}),
        "delete key": lambda: m.delete_memory(S),
    }
    codes = {}
    for name, call in calls.items():
        try:
            call()
            codes[name] = "accepted"
        except MemoryError as exc:
            codes[name] = exc.code.value if hasattr(exc.code, "value") else str(exc.code)
        except Exception as exc:
            codes[name] = type(exc).__name__
    return codes
'''


def test_a_lone_surrogate_in_any_string_of_any_call_is_invalid_input(project: Project) -> None:
    write_gene(project.genes_dir, "strings", GENE)
    wrap_gene(project, "strings")
    Agents(project).create("a", ["strings"], "seq", 1 << 20)
    codes = run_agent(project, "a", {})
    assert len(codes) == 18
    wrong = {name: code for name, code in codes.items() if code != "MEMORY_INVALID_INPUT"}
    assert wrong == {}, wrong
