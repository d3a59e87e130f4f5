"""What a Node.js gene runs: its source, or what rotifer's own transpile step
made of it, and the cache of that step.

Why a step of its own (``transpile.js`` in a process that never runs gene
code) and not the gene's runner: the cache is read by every later run of the
same source, in every agent and under every gene that has those bytes, so
what it holds must be the compiler's output and nothing a gene's process
could write.  The runner only ever receives the JavaScript (``start.js``);
no message it sends reaches the cache (the bridge refuses any but the
protocol's: contain/channel.py).

The cache, ``<cache>/node/<sha256 of transpile.js and the source>.ts-<version>.js``
(``.mjs.js`` for an ``index.js`` written with import/export), is written only
here, atomically, 0600, its first line a header naming that digest, the
compiler's version and the SHA-256 of the JavaScript below it; a file whose
header does not match its name and its text is not used (and is replaced).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from rotifer.genes.errors import GeneFailed, GeneUnavailable
from rotifer.genes.gene import Gene
from rotifer.memory.private import private_dir

TRANSPILER = Path(__file__).with_name("transpile.js")
#: The transpile step is rotifer's, not the gene's time: bounded on its own.
TRANSPILE_TIMEOUT_S = 60.0
#: A CommonJS ``index.js`` cannot use module syntax without these words.
_MAYBE_MODULE = re.compile(r"\b(?:import|export)\b")
_HEADER = "// rotifer-transpiled {digest} typescript={version} sha256={body}\n"

Preexec = Callable[[], None] | None


def typescript_version(modules: Path | None) -> str | None:
    """The version of ``modules/typescript`` (read from its package.json, without
    loading the compiler), or None when there is none."""
    if modules is None:
        return None
    try:
        version = json.loads((modules / "typescript" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return re.sub(r"[^0-9A-Za-z.+-]", "_", str(version)) or None


@lru_cache(maxsize=1)
def _transpiler_digest() -> bytes:
    return hashlib.sha256(TRANSPILER.read_bytes()).digest()


def needs_transpiling(gene: Gene, source: str) -> bool:
    """An ``index.ts``, or an ``index.js`` that may use import/export."""
    return gene.code_file.suffix == ".ts" or _MAYBE_MODULE.search(source) is not None


def cache_file(gene: Gene, cache_dir: Path | None, modules: Path | None) -> Path | None:
    """Where the transpiled JavaScript of ``gene`` is kept (see the module
    docstring).  With no compiler installed, an output of this very source and
    step by any version is used (better than failing)."""
    if cache_dir is None:
        return None
    digest = hashlib.sha256(_transpiler_digest() + gene.code).hexdigest()
    suffix = ".js" if gene.code_file.suffix == ".ts" else ".mjs.js"
    version = typescript_version(modules)
    if version is None:
        pattern = re.compile(re.escape(digest) + r"\.ts-[0-9A-Za-z+_-]+(?:\.[0-9A-Za-z+_-]+)*"
                             + re.escape(suffix))
        made = sorted(p.name for p in cache_dir.glob(f"{digest}.ts-*")
                      if pattern.fullmatch(p.name) and not (suffix == ".js"
                                                        and p.name.endswith(".mjs.js")))
        return cache_dir / (made[-1] if made else f"{digest}.ts-none{suffix}")
    return cache_dir / f"{digest}.ts-{version}{suffix}"


def _key(path: Path) -> tuple[str, str]:
    """The digest and compiler version a cache file's name says it holds."""
    digest, _, rest = path.name.partition(".ts-")
    version = rest.removesuffix(".js").removesuffix(".mjs")
    return digest, version


def read_cache(path: Path | None) -> str | None:
    """The JavaScript kept in ``path``, if its header matches its name and its text."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    header, newline, body = text.partition("\n")
    digest, version = _key(path)
    expected = _HEADER.format(digest=digest, version=version,
                              body=hashlib.sha256(body.encode("utf-8")).hexdigest())
    return body if newline and header + newline == expected else None


def write_cache(path: Path | None, js: str) -> None:
    """Keep rotifer's own transpilation (atomically: a rename; 0600 in a 0700
    folder); a cache that cannot be written only costs a transpilation next time."""
    if path is None:
        return
    digest, version = _key(path)
    body = hashlib.sha256(js.encode("utf-8")).hexdigest()
    text = _HEADER.format(digest=digest, version=version, body=body) + js
    with contextlib.suppress(OSError):
        private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")  # 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def javascript(gene: Gene, source: str, *, node: str, modules: Path | None,
               cache_dir: Path | None, preexec: Preexec, env: dict[str, str] | None) -> str:
    """What the runner is to execute for ``gene``: its source when it needs no
    compiler, else the cached or freshly made transpilation (``preexec``/``env``
    confine the transpile step as a gene's process is)."""
    if not needs_transpiling(gene, source):
        return source
    path = cache_file(gene, cache_dir, modules)
    cached = read_cache(path)
    if cached is not None:
        return cached
    request = json.dumps({"code": source, "fileName": gene.code_file.name,
                          "nodeModules": str(modules) if modules else None})
    try:
        done = subprocess.run([node, "--no-warnings", str(TRANSPILER)], input=request.encode(),
                              capture_output=True, timeout=TRANSPILE_TIMEOUT_S, check=False,
                              cwd="/", env=env, preexec_fn=preexec)
        answer = json.loads(done.stdout)
    except subprocess.TimeoutExpired:
        raise GeneFailed(f"gene '{gene.name}': transpiling {gene.code_file.name} took over "
                         f"{TRANSPILE_TIMEOUT_S:g} s") from None
    except (OSError, subprocess.SubprocessError, ValueError):
        tail = locals().get("done")
        why = tail.stderr[-500:].decode("utf-8", "replace").strip() if tail else ""
        raise GeneFailed(f"gene '{gene.name}': the transpile step failed"
                         + (f": {why}" if why else "")) from None
    if not isinstance(answer, dict):
        raise GeneFailed(f"gene '{gene.name}': the transpile step answered {answer!r}")
    if answer.get("error") == "unavailable":
        why = "" if gene.code_file.suffix == ".ts" else (
            f"{gene.code_file.name} uses ES module syntax (import/export), which needs the "
            "compiler too (or write it as CommonJS: exports.express = ...); ")
        raise GeneUnavailable(
            f"gene '{gene.name}' ({gene.code_file.name}): {why}the typescript package is not "
            "installed; run `make node-deps` (npm ci) in the rotifer checkout, or set "
            "ROTIFER_NODE_MODULES to a node_modules folder that has it")
    if answer.get("error") == "syntax":
        raise GeneFailed(f"gene '{gene.name}': {gene.code_file.name} cannot be loaded: "
                         f"SyntaxError: {answer.get('message')}")
    js = answer.get("js")
    if not isinstance(js, str):
        raise GeneFailed(f"gene '{gene.name}': the transpile step answered no JavaScript")
    if js != source:  # CommonJS JavaScript is run as it is: nothing to keep
        write_cache(path, js)
    return js
