"""``rotifer new gene NAME``: a gene folder that wraps and runs at once.

Like ``cargo new``, it writes a small, complete starting point and refuses to
touch a folder that exists.  Each kind remembers something in the agent's
memory and still runs alone (``rotifer run``, where every memory call is
refused: the gene says so in its output instead of failing), so every command
of the first hour works on it as written:

- ``python`` (default): ``gene.py``, counts how often it greeted a name;
- ``typescript``: ``index.ts``, the same (needs ``make node-deps``);
- ``wat``: ``gene.wat``, WebAssembly text that ``rotifer compile`` turns into
  ``gene.wasm``; remembers that it ran (no toolchain needed).

Each gets a ``phenotype.json`` (its domain is its name) and a ``tests.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from rotifer.genes.errors import RotiferError
from rotifer.genes.gene import validate_gene_name

from .project import Project

Kind = Literal["python", "typescript", "wat"]
KINDS: tuple[Kind, ...] = ("python", "typescript", "wat")

PYTHON = '''"""The gene NAME: express(input, ctx) -> output (docs/genes.md)."""

from rotifer.memory import MemoryError

KEY = "NAME/greeted"


def express(input, ctx):
    name = input.get("name", "world")
    key = f"{KEY}/{name}"
    try:
        seen = ctx.memory.read_memory(key, "CONTEXT")
        count = int(seen.value.decode()) + 1 if seen else 1
        ctx.memory.write_memory(key, str(count).encode(), "CONTEXT")
    except MemoryError as exc:  # `rotifer run` runs a gene alone: no memory
        ctx.log("no memory:", exc.code)
        count = None
    return {"greeting": f"hello {name}", "count": count}
'''

TYPESCRIPT = '''// The gene NAME: express(input, ctx) -> output (docs/node.md).
import type { GeneMemoryAccess } from "@rotifer/playground/memory";

const KEY = "NAME/greeted";

export function express(input: { name?: string },
                        ctx: { memory: GeneMemoryAccess; log: (...p: unknown[]) => void }) {
  const name = input.name ?? "world";
  const key = `${KEY}/${name}`;
  let count: number | null = null;
  try {
    const seen = ctx.memory.readMemory(key, "CONTEXT");
    count = seen ? Number(new TextDecoder().decode(seen.value)) + 1 : 1;
    ctx.memory.writeMemory(key, new TextEncoder().encode(String(count)), "CONTEXT");
  } catch (err) { // `rotifer run` runs a gene alone: no memory
    ctx.log("no memory:", (err as { code?: string }).code);
    count = null;
  }
  return { greeting: `hello ${name}`, count };
}
'''

# The requests are JSON in data segments; "eWVz" is base64 of "yes".
WAT = ''';; The gene NAME in WebAssembly text (docs/wasm.md); `rotifer compile NAME`
;; writes gene.wasm.  The first run in an agent writes "NAME/seen" to its memory
;; and returns {"seen": false}; later runs find it: {"seen": true}.  Alone
;; (`rotifer run`), every memory call is refused: {"seen": false, "memory": false}.
(module
  (import "rotifer" "readMemory" (func $read (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "writeMemory" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "READ")
  (data (i32.const 2048) "WRITE")
  (data (i32.const 3072) "{\\"seen\\":true}\\00")
  (data (i32.const 3136) "{\\"seen\\":false}\\00")
  (data (i32.const 3200) "{\\"seen\\":false,\\"memory\\":false}\\00")
  ;; express(input_ptr, input_len) -> a pointer to NUL-terminated output JSON.
  ;; The input (written at offset 0 when there is no alloc) is not needed here.
  (func (export "express") (param $ptr i32) (param $len i32) (result i32)
    (local $r i32)
    ;; the response goes to 8192..16383; 4 bytes ("null") means no entry
    (local.set $r (call $read (i32.const 1024) (i32.const READ_LEN)
                              (i32.const 8192) (i32.const 8192)))
    (if (i32.lt_s (local.get $r) (i32.const 0)) (then (return (i32.const 3200))))
    (if (i32.gt_s (local.get $r) (i32.const 4)) (then (return (i32.const 3072))))
    (local.set $r (call $write (i32.const 2048) (i32.const WRITE_LEN)
                               (i32.const 8192) (i32.const 8192)))
    (if (i32.lt_s (local.get $r) (i32.const 0)) (then (return (i32.const 3200))))
    (i32.const 3136)))
'''


def _wat(name: str) -> str:
    read = json.dumps({"key": f"{name}/seen", "category": "CONTEXT"}, separators=(",", ":"))
    write = json.dumps({"key": f"{name}/seen", "value": "eWVz", "category": "CONTEXT"},
                       separators=(",", ":"))

    def literal(text: str) -> str:
        return text.replace("\\", "\\\\").replace('"', '\\"')

    return (WAT.replace("READ_LEN", str(len(read.encode())))
            .replace("WRITE_LEN", str(len(write.encode())))
            .replace('"READ"', f'"{literal(read)}"').replace('"WRITE"', f'"{literal(write)}"')
            .replace("NAME", name))


def _phenotype(name: str, kind: Kind) -> dict[str, object]:
    if kind == "wat":
        output: dict[str, object] = {"type": "object",
                                     "properties": {"seen": {"type": "boolean"},
                                                    "memory": {"type": "boolean"}}}
        schema: dict[str, object] = {"type": "object"}
    else:
        output = {"type": "object", "properties": {"greeting": {"type": "string"},
                                                   "count": {"type": ["integer", "null"]}}}
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    return {"name": name, "domain": name, "version": "0.1.0", "fidelity": "Wrapped",
            "inputSchema": schema, "outputSchema": output}


def _tests(kind: Kind) -> dict[str, object]:
    if kind == "wat":
        return {"cases": [
            {"name": "first run writes", "input": {}, "expect": {"seen": False}},
            {"name": "second run finds it", "input": {}, "expect": {"seen": True}}]}
    return {"cases": [
        {"name": "greets", "input": {"name": "Ada"},
         "expect": {"greeting": "hello Ada", "count": 1}},
        {"name": "remembers", "input": {"name": "Ada"},
         "expect": {"greeting": "hello Ada", "count": 2}}]}


FILES = {"python": "gene.py", "typescript": "index.ts", "wat": "gene.wat"}


def new_gene(project: Project, name: str, kind: Kind = "python") -> Path:
    """Write ``genes/NAME`` (code, phenotype, tests); GENE_EXISTS if the folder exists."""
    validate_gene_name(name)
    folder = project.genes_dir / name
    if folder.exists():
        raise RotiferError(f"genes/{name} already exists ({folder}); pick another name or "
                           "remove it first", code="GENE_EXISTS")
    code = {"python": PYTHON, "typescript": TYPESCRIPT}.get(kind)
    text = _wat(name) if code is None else code.replace("NAME", name)
    try:
        folder.mkdir(parents=True)
        (folder / FILES[kind]).write_text(text, encoding="utf-8")
        (folder / "phenotype.json").write_text(
            json.dumps(_phenotype(name, kind), indent=2) + "\n", encoding="utf-8")
        (folder / "tests.json").write_text(json.dumps(_tests(kind), indent=2) + "\n",
                                           encoding="utf-8")
    except OSError as exc:
        raise RotiferError(f"cannot write {folder}: {exc.strerror or exc}",
                           code="PROJECT_ERROR") from None
    return folder
