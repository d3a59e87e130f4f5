"""The Python side of the Node.js bridge: start ``node runner.js``, answer its
memory calls, enforce the deadline, and turn what it reports into results.

Why a child process with two pipes (one for replies, one for calls) rather
than stdin/stdout: a gene's own ``process.stdout.write`` must not be able to
forge a bridge message.  Why synchronous: the seed's four calls return their
result directly, so the runner blocks in ``fs.readSync`` until the reply
arrives; nothing else runs in the gene meanwhile.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from rotifer.genes.errors import GeneFailed, GeneUnavailable, rejection_of
from rotifer.genes.gene import Gene
from rotifer.memory import UNSET, GeneMemoryAccess, MemoryEntry, MemoryError
from rotifer.memory.errors import invalid

RUNNER = Path(__file__).with_name("runner.js")
MIN_NODE_MAJOR = 18
ENV_NODE = "ROTIFER_NODE"
ENV_NODE_MODULES = "ROTIFER_NODE_MODULES"
#: A gene's output, logs and memory traffic beyond this many bytes a message is refused.
MAX_MESSAGE_BYTES = 64 << 20

LogSink = Any  # Callable[[str, str], None]; kept loose to avoid importing genes.python


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


def node_modules_dir(gene: Gene) -> Path | None:
    """Where ``typescript`` is looked for: ``$ROTIFER_NODE_MODULES``, else the
    nearest ``node_modules/typescript`` above the gene, else above this package
    (a source checkout after ``make node-deps``)."""
    env = os.environ.get(ENV_NODE_MODULES)
    if env:
        return Path(env)
    for start in (gene.path, Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            if (folder / "node_modules" / "typescript" / "package.json").is_file():
                return folder / "node_modules"
    return None


def _entry(entry: MemoryEntry | None) -> dict[str, Any] | None:
    return None if entry is None else entry.to_json()


def _value(doc: Any) -> Any:
    """``{"$bytes": b64}`` -> bytes; anything else is passed on so the store
    refuses it as "not bytes" (MEMORY_INVALID_INPUT)."""
    if isinstance(doc, dict) and isinstance(doc.get("$bytes"), str):
        return base64.b64decode(doc["$bytes"])
    return doc


def serve(memory: GeneMemoryAccess, call: dict[str, Any]) -> Any:
    """Carry out one memory call of the gene; its JSON result."""
    op = call.get("op")
    if op == "readMemory":
        return _entry(memory.read_memory(call.get("key"), call.get("category")))  # type: ignore[arg-type]
    if op == "writeMemory":
        return _entry(memory.write_memory(
            call.get("key"), _value(call.get("value")), call.get("category"),  # type: ignore[arg-type]
            call.get("accessPolicy"),
            call.get("retentionPolicy", UNSET),
        ))
    if op == "queryMemory":
        return [_entry(e) for e in memory.query_memory(call.get("filter"))]
    if op == "deleteMemory":
        memory.delete_memory(call.get("key"))  # type: ignore[arg-type]
        return None
    raise invalid(f"unknown memory call {op!r}")


def _reply(memory: GeneMemoryAccess, call: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"ok": serve(memory, call)}
    except MemoryError as exc:
        return {"error": exc.to_json()}
    except (TypeError, ValueError, AttributeError) as exc:  # arguments of the wrong shape
        return {"error": {"code": "MEMORY_INVALID_INPUT", "message": str(exc)}}


def _cache_file(gene: Gene, cache_dir: Path | None) -> str | None:
    if cache_dir is None or gene.code_file.suffix != ".ts":
        return None
    digest = hashlib.sha256(gene.code).hexdigest()
    return str(cache_dir / f"{digest}.js")


def run_node_gene(gene: Gene, input: Any, memory: GeneMemoryAccess, *, deadline_s: float = 10.0,
                  agent: str | None = None, log_sink: LogSink | None = None,
                  cache_dir: Path | None = None) -> Any:
    """Run ``gene`` (kind ``node``) on ``input`` with its memory calls served by ``memory``.

    ``cache_dir`` keeps TypeScript transpiled to JavaScript, by the SHA-256 of
    the source, so a second run does not load the compiler.
    """
    node = find_node()
    try:
        source = gene.code.decode("utf-8")
    except UnicodeDecodeError:
        raise GeneFailed(f"gene '{gene.name}': {gene.code_file.name} is not UTF-8") from None
    modules = node_modules_dir(gene)
    start = {
        "type": "start", "code": source, "fileName": gene.code_file.name,
        "geneDir": str(gene.path), "input": input, "agent": agent,
        "gene": {"name": gene.name, "domain": gene.domain, "version": gene.phenotype.version,
                 "v2Id": gene.v2_id},
        "nodeModules": str(modules) if modules else None,
        "cacheFile": _cache_file(gene, cache_dir),
    }
    bridge = _Bridge(node, gene, deadline_s)
    try:
        bridge.send(start)
        while True:
            message = bridge.receive()
            kind = message.get("type")
            if kind == "call":
                bridge.send(_reply(memory, message))
            elif kind == "log":
                if log_sink is not None:
                    log_sink(gene.name, str(message.get("line", "")))
            elif kind == "result":
                output = message.get("output")
                rejected = rejection_of(output)
                if rejected is not None:
                    raise rejected
                return output
            elif kind == "error":
                raise _error(gene, message)
            else:
                raise GeneFailed(f"gene '{gene.name}': the Node.js runner sent {kind!r}")
    finally:
        bridge.close()


def _error(gene: Gene, message: dict[str, Any]) -> Exception:
    kind, text = message.get("kind"), str(message.get("message", ""))
    if kind == "memory":
        try:
            return MemoryError(str(message.get("code")), text)
        except ValueError:  # the gene threw a MemoryError with a code of its own
            return GeneFailed(f"gene '{gene.name}' threw MemoryError({message.get('code')!r}): "
                              f"{text}")
    if kind == "unavailable":
        return GeneUnavailable(f"gene '{gene.name}' ({gene.code_file.name}): {text}")
    if kind == "load":
        return GeneFailed(f"gene '{gene.name}': {gene.code_file.name} cannot be loaded: {text}")
    return GeneFailed(f"gene '{gene.name}' failed: {text}")


class _Bridge:
    """The child process and the two pipes to it."""

    def __init__(self, node: str, gene: Gene, deadline_s: float) -> None:
        self.gene = gene
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        try:
            # The child inherits the two pipe ends under the same numbers, which
            # it gets as arguments: it reads replies from the first, writes calls
            # to the second.
            self.proc = subprocess.Popen(
                [node, "--no-warnings", str(RUNNER), str(to_child_r), str(from_child_w)],
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                pass_fds=(to_child_r, from_child_w), cwd=str(gene.path),
            )
        except OSError as exc:
            for fd in (to_child_r, from_child_w, self._to_child, self._from_child):
                os.close(fd)
            self._log.close()
            raise GeneUnavailable(f"cannot start Node.js ({node}): {exc}") from None
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._from_child, selectors.EVENT_READ)

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=False, allow_nan=False) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._to_child, view):]
        except BrokenPipeError:
            raise self._died() from None

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                self.proc.kill()
                raise GeneFailed(f"gene '{self.gene.name}' timed out after {self.deadline_s:g} s "
                                 "(the Node.js process was killed)")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise self._died()
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                self.proc.kill()
                raise GeneFailed(f"gene '{self.gene.name}' sent a message over "
                                 f"{MAX_MESSAGE_BYTES >> 20} MiB")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self.proc.kill()
            raise GeneFailed(f"gene '{self.gene.name}': the Node.js runner sent a message that "
                             "is not JSON")
        return message

    def _died(self) -> GeneFailed:
        try:
            status = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        self._log.seek(0)
        tail = self._log.read()[-2000:].decode("utf-8", "replace").strip()
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        return GeneFailed(f"gene '{self.gene.name}': the Node.js process {how} before it "
                          "returned an output" + (f": {tail}" if tail else ""))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._selector.close()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._log.close()

