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
import math
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rotifer.genes.errors import GeneFailed, GeneUnavailable, rejection_of
from rotifer.genes.gene import Gene
from rotifer.memory import UNSET, AgentMemoryError, GeneMemoryAccess, MemoryEntry
from rotifer.memory.errors import invalid

if TYPE_CHECKING:  # the same sink type as Python genes, without importing their runner
    from rotifer.genes.python import LogSink

RUNNER = Path(__file__).with_name("runner.js")
#: The folder holding ``@rotifer/playground/memory.d.ts`` (the types genes import).
TYPES_DIR = Path(__file__).with_name("types")
MIN_NODE_MAJOR = 18
ENV_NODE = "ROTIFER_NODE"
ENV_NODE_MODULES = "ROTIFER_NODE_MODULES"
#: A gene's output, logs and memory traffic beyond this many bytes a message is refused.
MAX_MESSAGE_BYTES = 64 << 20



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


def node_modules_dir(gene: Gene | None = None) -> Path | None:
    """Where ``typescript`` is looked for: ``$ROTIFER_NODE_MODULES``, else the
    nearest ``node_modules/typescript`` above this package (the repository
    root of a source checkout after ``make node-deps``: the version pinned in
    package-lock.json).  Never a ``node_modules`` of the gene's project: a
    project's own TypeScript would silently replace the pinned one.  ``gene``
    is accepted for callers that pass it and not used."""
    env = os.environ.get(ENV_NODE_MODULES)
    if env:
        return Path(env)
    start = Path(__file__).resolve().parent
    for folder in (start, *start.parents):
        if (folder / "node_modules" / "typescript" / "package.json").is_file():
            return folder / "node_modules"
    return None


def _typescript_version(modules: Path | None) -> str | None:
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
def _runner_digest() -> bytes:
    return hashlib.sha256(RUNNER.read_bytes()).digest()


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


def _entry(entry: MemoryEntry | None) -> dict[str, Any] | None:
    return None if entry is None else entry.to_json()


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


def serve(memory: GeneMemoryAccess, call: dict[str, Any]) -> Any:
    """Carry out one memory call of the gene; its JSON result."""
    call = _numbers(call)
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
    except AgentMemoryError as exc:
        return {"error": exc.to_json()}
    except (TypeError, ValueError, AttributeError) as exc:  # arguments of the wrong shape
        return {"error": {"code": "MEMORY_INVALID_INPUT", "message": str(exc)}}


def _cache_file(gene: Gene, cache_dir: Path | None, modules: Path | None) -> str | None:
    """Where the transpiled JavaScript of ``gene`` is kept:
    ``<sha256 of runner.js and the source>.ts-<typescript version>.js``
    (``.mjs.js`` for an ``index.js`` written with import/export).  The runner
    holds the compiler options and the version is the compiler's, so a changed
    runner or a new pin misses the old output.  With no compiler installed,
    an output of this very source and runner by any version is used (better
    than failing)."""
    if cache_dir is None:
        return None
    digest = hashlib.sha256(_runner_digest() + gene.code).hexdigest()
    suffix = ".js" if gene.code_file.suffix == ".ts" else ".mjs.js"
    version = _typescript_version(modules)
    if version is None:
        pattern = re.compile(re.escape(digest) + r"\.ts-[0-9A-Za-z+_-]+(?:\.[0-9A-Za-z+_-]+)*"
                             + re.escape(suffix) + "$")
        made = sorted(p.name for p in cache_dir.glob(f"{digest}.ts-*")
                      if pattern.match(p.name) and not (suffix == ".js"
                                                        and p.name.endswith(".mjs.js")))
        version_file = made[-1] if made else f"{digest}.ts-none{suffix}"
        return str(cache_dir / version_file)
    return str(cache_dir / f"{digest}.ts-{version}{suffix}")


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
        "cacheFile": _cache_file(gene, cache_dir, modules),
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
            return AgentMemoryError(str(message.get("code")), text)
        except ValueError:  # the gene threw a MemoryError with a code of its own
            return GeneFailed(f"gene '{gene.name}' threw MemoryError({message.get('code')!r}): "
                              f"{text}")
    if kind == "unavailable":
        return GeneUnavailable(f"gene '{gene.name}' ({gene.code_file.name}): {text}")
    if kind == "load":
        return GeneFailed(f"gene '{gene.name}': {gene.code_file.name} cannot be loaded: {text}")
    return GeneFailed(f"gene '{gene.name}' failed: {text}")


class _Bridge:
    """The child process (leader of its own process group) and the pipes to it.

    Every wait, for writing as for reading, is bounded by the run's deadline,
    and the child's stderr is drained meanwhile (only its tail is kept), so
    neither a child that stops reading nor one that floods stderr can stall
    the host.
    """

    def __init__(self, node: str, gene: Gene, deadline_s: float) -> None:
        self.gene = gene
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            # The child inherits the two pipe ends under the same numbers, which
            # it gets as arguments: it reads replies from the first, writes calls
            # to the second.
            self.proc = subprocess.Popen(
                [node, "--no-warnings", str(RUNNER), str(to_child_r), str(from_child_w)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_w,
                pass_fds=(to_child_r, from_child_w), cwd=str(gene.path),
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (to_child_r, from_child_w, err_w, err_r, self._to_child,
                       self._from_child):
                os.close(fd)
            raise GeneUnavailable(f"cannot start Node.js ({node}): {exc}") from None
        for fd in (to_child_r, from_child_w, err_w):
            os.close(fd)
        os.set_blocking(self._to_child, False)
        os.set_blocking(err_r, False)
        self._err: int | None = err_r
        self._err_tail = b""
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(err_r, selectors.EVENT_READ)

    def _wait_for(self, fd: int, events: int) -> None:
        """Block until ``fd`` is ready for ``events``, draining stderr; past the
        deadline kill the child and fail the run."""
        self._selector.register(fd, events)
        try:
            while True:
                remaining = self.deadline - time.monotonic()
                ready = self._selector.select(remaining) if remaining > 0 else []
                if not ready:
                    self._kill()
                    raise GeneFailed(f"gene '{self.gene.name}' timed out after "
                                     f"{self.deadline_s:g} s (the Node.js process was killed)")
                if any(key.fd == fd for key, _ in ready):
                    return
                self._drain_stderr()
        finally:
            self._selector.unregister(fd)

    def _drain_stderr(self) -> None:
        if self._err is None:
            return
        while True:
            try:
                chunk = os.read(self._err, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:  # the child (and all it started) closed stderr
                self._selector.unregister(self._err)
                os.close(self._err)
                self._err = None
                return
            self._err_tail = (self._err_tail + chunk)[-4096:]

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=False, allow_nan=False) + "\n").encode()
        view = memoryview(data)
        while view:
            self._wait_for(self._to_child, selectors.EVENT_WRITE)
            try:
                view = view[os.write(self._to_child, view):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._died() from None

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._wait_for(self._from_child, selectors.EVENT_READ)
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise self._died()
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                self._kill()
                raise GeneFailed(f"gene '{self.gene.name}' sent a message over "
                                 f"{MAX_MESSAGE_BYTES >> 20} MiB (the Node.js process was "
                                 "killed)")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self._kill()
            raise GeneFailed(f"gene '{self.gene.name}': the Node.js runner sent a message that "
                             "is not JSON")
        return message

    def _kill(self) -> None:
        """SIGKILL the child's process group: the child and whatever it started.

        The group's id is the child's pid, which POSIX does not hand to another
        process while the group has members; once it has none, this finds
        nothing (ESRCH) and does nothing."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def _died(self) -> GeneFailed:
        try:
            status = self.proc.wait(timeout=max(0.1, min(5.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            self._kill()
            status = self.proc.wait()
        self._drain_stderr()
        tail = self._err_tail[-2000:].decode("utf-8", "replace").strip()
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        return GeneFailed(f"gene '{self.gene.name}': the Node.js process {how} before it "
                          "returned an output" + (f": {tail}" if tail else ""))

    def close(self) -> None:
        """Kill what is left of the run (the child, anything it started) and reap it."""
        self._kill()
        self.proc.wait()
        self._selector.close()
        for fd in (self._to_child, self._from_child, self._err):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
