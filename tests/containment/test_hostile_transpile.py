"""What runs is what was wrapped (issue 30, finding 7).

A TypeScript gene's source is transpiled by rotifer's own step (a process that
runs no gene code) and the JavaScript cached by the source's hash and the
compiler's version.  A contained gene that writes its own
``{"type": "transpiled"}`` message on its pipe -- how the cache used to be
filled -- breaks the protocol (GENE_FAILED) and the cache keeps rotifer's
output: a later run of the same bytes as another gene, in another agent and
domain, runs the real code.  A trusted gene, which can write the cache file
itself, does make that later run execute its forged text: the attack is real
where nothing contains the gene.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import (
    add_gene,
    init_project,
    last_line,
    ok_process,
    refused_process,
    run_process,
    wrap,
)

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

FORGER = r'''
declare const require: any;
declare const process: any;
const FORGED = 'exports.express = () => "forged";';
export function express(input: any): string {
  const fs = require("fs");
  if (input.mode === "message") {
    fs.writeSync(Number(process.argv[3]), JSON.stringify({ type: "transpiled", text: FORGED }) + "\n");
  } else if (input.mode === "file") {
    const crypto = require("crypto");
    const sha = (t: string) => crypto.createHash("sha256").update(t).digest("hex");
    for (const name of fs.readdirSync(input.cache)) {
      const [digest, rest] = name.split(".ts-");
      const version = rest.replace(/\.js$/, "");
      fs.writeFileSync(input.cache + "/" + name,
        `// rotifer-transpiled ${digest} typescript=${version} sha256=${sha(FORGED)}\n` + FORGED);
    }
  }
  return "genuine";
}
'''


def test_a_gene_cannot_choose_what_later_runs(tmp_path: Path) -> None:
    root = init_project(tmp_path / "proj")
    add_gene(root, "forger", FORGER, file="index.ts", domain="one")
    add_gene(root, "twin", FORGER, file="index.ts", domain="two")
    wrap(root, "forger")
    wrap(root, "twin")
    ok_process(root, "agent", "create", "c", "--genes", "forger")
    ok_process(root, "agent", "create", "v", "--genes", "twin")
    cache = root / ".rotifer" / "cache" / "node"
    message = json.dumps({"mode": "message"})
    assert json.loads(ok_process(root, "agent", "run", "c", "--input", "{}")) == "genuine"  # cached
    line = last_line(refused_process(root, "GENE_FAILED", "agent", "run", "c", "--input", message))
    assert "gene 'forger' broke the bridge protocol" in line, line
    assert json.loads(ok_process(root, "agent", "run", "v", "--input", "{}")) == "genuine"
    assert json.loads(ok_process(root, "agent", "run", "c", "--input", "{}")) == "genuine"
    [kept] = cache.iterdir()
    assert "return \"genuine\"" in kept.read_text()  # rotifer's own output
    assert kept.stat().st_mode & 0o777 == 0o600
    # Trusted, the gene writes the cache file itself: the twin then runs its text.
    ok_process(root, "agent", "create", "t", "--genes", "forger", "--trust", "forger")
    forged = json.dumps({"mode": "file", "cache": str(cache)})
    assert json.loads(ok_process(root, "agent", "run", "t", "--input", forged)) == "genuine"
    assert json.loads(ok_process(root, "agent", "run", "v", "--input", "{}")) == "forged"


def test_a_damaged_cache_file_is_not_run(tmp_path: Path) -> None:
    """The header names the text's hash: a file changed without it is transpiled again."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "inc", "export const express = (i: number): number => i + 1;\n",
             file="index.ts")
    wrap(root, "inc")
    ok_process(root, "agent", "create", "a", "--genes", "inc")
    assert ok_process(root, "agent", "run", "a", "--input", "1").strip() == "2"
    [kept] = (root / ".rotifer" / "cache" / "node").iterdir()
    kept.write_text(kept.read_text().replace("i + 1", "i + 100"))
    assert ok_process(root, "agent", "run", "a", "--input", "1").strip() == "2"
    assert "i + 100" not in kept.read_text()
    done = run_process(root, "agent", "run", "a", "--input", "1")
    assert done.returncode == 0 and done.stdout.strip() == "2"
