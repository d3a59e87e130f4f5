"""The seed's example is the one in the specification, and the shipped
``@rotifer/playground/memory`` declarations type it (checked by the pinned
``tsc``, so the import resolves and the types are not ``any``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rotifer.genes.node import TYPES_DIR, find_node, install_types, node_modules_dir
from rotifer.genes.node.bridge import ENV_NODE_MODULES

GENES = Path(__file__).parent / "genes"

#: The specification's "Example: a gene that remembers a preference", as printed.
SEED_EXAMPLE = '''\
import type { GeneMemoryAccess } from "@rotifer/playground/memory";

// reindent() is the gene's own formatting logic, not shown here.
const KEY = "formatter/indent";

export function express(
  input: { code: string; indent?: number },
  ctx: { memory: GeneMemoryAccess },
): { formatted: string; indent: number } {
  let indent = input.indent;

  if (indent === undefined) {
    const saved = ctx.memory.readMemory(KEY, "PREFERENCE");
    indent = saved ? Number(new TextDecoder().decode(saved.value)) : 2;
  } else {
    ctx.memory.writeMemory(
      KEY,
      new TextEncoder().encode(String(indent)),
      "PREFERENCE",
    );
  }

  return { formatted: reindent(input.code, indent), indent };
}
'''

BAD = '''\
import type { GeneMemoryAccess, MemoryEntry } from "@rotifer/playground/memory";
import { MemoryError } from "@rotifer/playground/memory";
export function express(input: unknown, ctx: { memory: GeneMemoryAccess }) {
  ctx.memory.writeMemory("k", "not bytes", "PREFERENCE");
  ctx.memory.readMemory("k", "preference");
  const code: "MEMORY_NOT_FOUND" | "MEMORY_ACCESS_DENIED" | "MEMORY_QUOTA_EXCEEDED" |
    "MEMORY_INVALID_INPUT" | "MEMORY_STORAGE_ERROR" = new MemoryError("MEMORY_NOT_FOUND", "x").code;
  const entries: MemoryEntry[] = ctx.memory.queryMemory({ nope: 1 });
  return [code, entries];
}
'''


def test_the_seed_gene_is_the_specification_example_plus_reindent() -> None:
    text = (GENES / "seed_formatter.ts").read_text()
    # Take out the one addition (the comment that says so and the function).
    added = re.search(r"// \(The one addition.*?\n\}\n", text, re.S)
    assert added is not None
    assert "function reindent(" in added.group(0)
    assert text.replace(added.group(0), "") == SEED_EXAMPLE


def tsc(folder: Path, files: list[str], **options: object) -> subprocess.CompletedProcess[str]:
    modules = typescript_modules()
    config = {"compilerOptions": {"strict": True, "noEmit": True, "target": "ES2022",
                                  "lib": ["ES2022", "DOM"], "types": [], **options},
              "files": files}
    (folder / "tsconfig.json").write_text(json.dumps(config))
    return subprocess.run([find_node(), str(modules / "typescript" / "bin" / "tsc"), "-p",
                           str(folder / "tsconfig.json")],
                          capture_output=True, text=True, timeout=120, check=False, cwd=folder)


def typescript_modules() -> Path:
    """The node_modules rotifer itself would use for a gene in this folder."""
    found = node_modules_dir()
    if found is None or not (found / "typescript" / "package.json").is_file():
        pytest.fail("the typescript package is not installed: run `make node-deps` (npm ci) "
                    f"in the rotifer checkout, or set {ENV_NODE_MODULES}")
    return found


def errors_by_file(out: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        match = re.match(r"(\w+\.ts)\(\d+,\d+\): error (TS\d+)", line)
        if match:
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


@pytest.mark.parametrize("how", ["paths", "install_types"])
def test_the_types_resolve_and_check_the_calls(tmp_path: Path, how: str) -> None:
    shutil.copyfile(GENES / "seed_formatter.ts", tmp_path / "good.ts")
    (tmp_path / "bad.ts").write_text(BAD)
    options: dict[str, object] = {"module": "commonjs"}
    if how == "paths":  # a tsconfig naming the installed package's folder
        options["paths"] = {"@rotifer/playground/*": [str(TYPES_DIR / "@rotifer" / "playground"
                                                          / "*")]}
    else:  # copied into the project's node_modules: no configuration at all
        target = install_types(tmp_path)
        assert (target / "memory.d.ts").read_bytes() == (
            TYPES_DIR / "@rotifer" / "playground" / "memory.d.ts").read_bytes()
        options.update(module="node16", moduleResolution="node16")
    done = tsc(tmp_path, ["good.ts", "bad.ts"], **options)
    # good.ts (the seed's example) checks; bad.ts has exactly its three mistakes:
    # a string value, a lowercase category, an unknown filter field.
    assert errors_by_file(done.stdout) == {"bad.ts": ["TS2345", "TS2345", "TS2353"]}, done.stdout


def test_typescript_is_installed_where_rotifer_looks_at_the_pinned_version() -> None:
    """One clear failure (never a skip) when `make node-deps` was not run."""
    installed = json.loads((typescript_modules() / "typescript" / "package.json").read_text())
    pinned = json.loads((Path(__file__).parents[2] / "package.json").read_text())
    assert installed["version"] == pinned["dependencies"]["typescript"], (
        "node_modules holds another typescript than package.json pins: run `make node-deps`")
