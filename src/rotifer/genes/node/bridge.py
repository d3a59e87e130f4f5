"""The Python side of the Node.js bridge: start ``node runner.js`` (confined:
:mod:`rotifer.genes.contain`), answer its memory calls, enforce the deadline,
and turn what it reports into results.

Why a child process with two pipes (one for replies, one for calls) rather
than stdin/stdout: a gene's own ``process.stdout.write`` must not be able to
forge a bridge message (:class:`rotifer.genes.contain.channel.Channel`).  Why synchronous: the seed's four calls return their
result directly, so the runner blocks in ``fs.readSync`` until the reply
arrives; nothing else runs in the gene meanwhile.
"""

from __future__ import annotations

import base64
import math
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rotifer.genes.calls import ALL_FIELDS, Op, error_reply, invalid, ok_reply, serve
from rotifer.genes.contain.channel import MAX_OUTPUT_BYTES, Channel
from rotifer.genes.contain.exposure import refuse_exposed
from rotifer.genes.contain.protocol import Shape
from rotifer.genes.contain.sandbox import CONTAINED, SYSTEM_READ, Grant, sandbox
from rotifer.genes.errors import GeneFailed, GeneUnavailable
from rotifer.genes.gene import Gene
from rotifer.memory import AgentMemoryError, GeneMemoryAccess

from . import transpiler

if TYPE_CHECKING:  # the same sink type as Python genes, without importing their runner
    from rotifer.genes.python import LogSink

RUNNER = Path(__file__).with_name("runner.js")
#: The folder holding ``@rotifer/playground/memory.d.ts`` (the types genes import).
TYPES_DIR = Path(__file__).with_name("types")
MIN_NODE_MAJOR = 18
#: A gene's output, logs and memory traffic beyond this many bytes a message is refused.
MAX_MESSAGE_BYTES = 64 << 20
ENV_NODE = "ROTIFER_NODE"
ENV_NODE_MODULES = "ROTIFER_NODE_MODULES"

@lru_cache(maxsize=4)
def _node_version(node: str) -> tuple[int, ...]:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GeneUnavailable(f"cannot run Node.js ({node}): {exc}") from None
    text = done.stdout.strip().lstrip("v")
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        raise GeneUnavailable(f"{node} --version printed {done.stdout!r}, not a version") from None


def find_node() -> str:
    """The ``node`` executable (``$ROTIFER_NODE`` or on PATH), at least Node 18."""
    node = os.environ.get(ENV_NODE) or shutil.which("node")
    if not node:
        raise GeneUnavailable("Node.js genes need `node` (Node.js 18 or newer) on PATH, or "
                              f"${ENV_NODE} naming it")
    version = _node_version(node)
    if version[:1] < (MIN_NODE_MAJOR,):
        raise GeneUnavailable(f"Node.js genes need Node.js {MIN_NODE_MAJOR} or newer; {node} is "
                              f"{'.'.join(map(str, version))}")
    return node


def node_modules_dir() -> Path | None:
    """Where ``typescript`` is looked for: ``$ROTIFER_NODE_MODULES``, else the
    nearest ``node_modules/typescript`` above this package (the repository
    root of a source checkout after ``make node-deps``: the version pinned in
    package-lock.json).  Never a ``node_modules`` of the gene's project: a
    project's own TypeScript would silently replace the pinned one."""
    env = os.environ.get(ENV_NODE_MODULES)
    if env:
        return Path(env)
    start = Path(__file__).resolve().parent
    for folder in (start, *start.parents):
        if (folder / "node_modules" / "typescript" / "package.json").is_file():
            return folder / "node_modules"
    return None


def install_types(root: Path) -> Path:
    """Copy the ``@rotifer/playground`` type declarations into
    ``root/node_modules/@rotifer/playground`` (where TypeScript and editors find
    ``import type ... from "@rotifer/playground/memory"`` with no configuration);
    returns that folder.  Rewrites the files, so a newer rotifer refreshes them."""
    source = TYPES_DIR / "@rotifer" / "playground"
    target = root / "node_modules" / "@rotifer" / "playground"
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file():
            shutil.copyfile(item, target / item.name)
    return target


def _value(doc: Any) -> Any:
    """``{"$bytes": b64}`` -> bytes; ``{"$notBytes": "a string"}`` (what the
    runner found instead of a Uint8Array) is MEMORY_INVALID_INPUT saying so;
    anything else is passed on so the store refuses it as "not bytes"."""
    if isinstance(doc, dict) and isinstance(doc.get("$bytes"), str):
        return base64.b64decode(doc["$bytes"])
    if isinstance(doc, dict) and isinstance(doc.get("$notBytes"), str):
        raise invalid(f"value must be bytes (a Uint8Array), not {doc['$notBytes'][:40]}")
    return doc


#: How the runner sends the numbers JSON has no spelling for.
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _numbers(doc: Any) -> Any:
    """``{"$number": "NaN"}`` (and the infinities) back to the float the gene
    passed, anywhere in a call, so that the store refuses it where JSON would
    have made it ``null`` (a default, or "no limit")."""
    if isinstance(doc, dict):
        if len(doc) == 1 and doc.get("$number") in _NON_FINITE:
            return _NON_FINITE[doc["$number"]]
        return {k: _numbers(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_numbers(v) for v in doc]
    return doc


def _fields(call: dict[str, Any]) -> dict[str, Any]:
    """A call message's fields, decoded (its ``type`` and ``op`` go along unread)."""
    fields: dict[str, Any] = _numbers(call)
    if "value" in fields:
        fields["value"] = _value(fields["value"])
    return fields


def _reply(memory: GeneMemoryAccess, call: dict[str, Any]) -> dict[str, Any]:
    try:  # the op is one of Op's: the channel accepts no other (CALLS)
        return ok_reply(serve(memory, Op(call["op"]), _fields, call))
    except AgentMemoryError as exc:
        return error_reply(exc)


def run_node_gene(gene: Gene, input: Any, memory: GeneMemoryAccess, *, deadline_s: float = 10.0,
                  agent: str | None = None, log_sink: LogSink | None = None,
                  cache_dir: Path | None = None, grant: Grant = CONTAINED,
                  max_output: int = MAX_OUTPUT_BYTES, check: bool = False) -> Any:
    """Run ``gene`` (kind ``node``) on ``input`` with its memory calls served by ``memory``.

    ``cache_dir`` keeps TypeScript transpiled to JavaScript, by the SHA-256 of
    the source, so a second run does not load the compiler.  Transpiling is
    rotifer's own step (:mod:`rotifer.genes.node.transpiler`, a process that
    runs no gene code, confined as the gene is); the runner gets only the
    JavaScript, and nothing it sends reaches the cache.  Unless
    ``grant.trusted``, both are confined between fork and exec
    (:mod:`rotifer.genes.contain`).  ``check``: only load the gene (its module
    runs, ``express`` must be an exported function) and return None.
    """
    node = find_node()
    try:
        source = gene.code.decode("utf-8")
    except UnicodeDecodeError:
        raise GeneFailed(f"gene '{gene.name}': {gene.code_file.name} is not UTF-8") from None
    modules = node_modules_dir()
    start = {
        "type": "start", "fileName": gene.code_file.name,
        "geneDir": str(gene.path), "input": input, "agent": agent,
        "gene": {"name": gene.name, "domain": gene.domain, "version": gene.phenotype.version,
                 "v2Id": gene.v2_id},
        "check": check,
    }
    argv = [node, "--no-warnings", str(RUNNER)]
    if grant.trusted:
        start["js"] = transpiler.javascript(gene, source, node=node, modules=modules,
                                            cache_dir=cache_dir, preexec=None, env=None)
        channel = Channel(argv, name=gene.name, what="Node.js", deadline_s=deadline_s,
                          cwd=str(gene.path), max_message=MAX_MESSAGE_BYTES, max_output=max_output)
        return _converse(channel, gene, start, memory, log_sink)
    read = [str(Path(os.path.realpath(node)).parent.parent), str(RUNNER.parent),
            str(gene.path), "/proc/self", "/sys/fs/cgroup", "/etc/ssl"]
    if modules is not None:
        read.append(str(modules))
    refuse_exposed(gene.name, gene.path, [*SYSTEM_READ, *read])
    with sandbox(gene.name, read, grant) as box:
        start["js"] = transpiler.javascript(gene, source, node=node, modules=modules,
                                            cache_dir=cache_dir, preexec=box.plan.apply,
                                            env=box.env)
        channel = Channel(argv, name=gene.name, what="Node.js", deadline_s=deadline_s,
                          cwd=str(gene.path), env=box.env, preexec=box.plan.apply,
                          max_message=MAX_MESSAGE_BYTES, max_output=max_output)
        return _converse(channel, gene, start, memory, log_sink)


#: What the runner may send (contain/channel.py's allowlist): the four calls
#: with their fields, and these kinds of error.
CALLS = Shape(frozenset({"type", "op"}) | ALL_FIELDS, frozenset(Op))
ERRORS = frozenset({"memory", "load", "failed"})


def _converse(channel: Channel, gene: Gene, start: dict[str, Any], memory: GeneMemoryAccess,
              log_sink: LogSink | None) -> Any:
    try:
        channel.send(start)
        return channel.converse(
            lambda message: _reply(memory, message), lambda message: _error(gene, message),
            None if log_sink is None else (lambda line: log_sink(gene.name, line)),
            calls=CALLS, errors=ERRORS)
    finally:
        channel.close()


def _error(gene: Gene, message: dict[str, Any]) -> Exception:
    kind, text = message.get("kind"), str(message.get("message", ""))
    if kind == "memory":
        try:
            return AgentMemoryError(str(message.get("code")), text)
        except ValueError:  # the gene threw a MemoryError with a code of its own
            return GeneFailed(f"gene '{gene.name}' threw MemoryError({message.get('code')!r}): "
                              f"{text}")
    if kind == "load":
        return GeneFailed(f"gene '{gene.name}': {gene.code_file.name} cannot be loaded: {text}")
    return GeneFailed(f"gene '{gene.name}' failed: {text}")
