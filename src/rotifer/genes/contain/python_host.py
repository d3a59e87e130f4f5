"""The parent side of a contained Python gene: get a confined child from the
fork server (:mod:`rotifer.genes.contain.forkserver`; it runs
:mod:`rotifer.genes.contain.pychild`), serve its memory calls as the gene it
was started for, pass its log and output on, enforce the deadline.

Why the fork server's child and not a fork of this process: see
:mod:`~rotifer.genes.contain.forkserver` (a fork of rotifer would carry the
store's pages, the environment and open descriptors into the gene's reach).
"""

from __future__ import annotations

import binascii
import contextlib
import sys
from typing import TYPE_CHECKING, Any

from rotifer.genes.calls import Op, error_reply, invalid, ok_reply, serve
from rotifer.genes.errors import GeneFailed, GeneRejected, GeneUnavailable, InvalidGene
from rotifer.memory import AgentMemoryError, MemoryEntry

from .channel import MAX_OUTPUT_BYTES, Channel, Child
from .exposure import refuse_exposed
from .forkserver import server
from .protocol import Shape
from .replies import NOTHING, entry_line
from .sandbox import SYSTEM_READ, Grant, python_read_paths, sandbox

if TYPE_CHECKING:
    from rotifer.genes.gene import Gene
    from rotifer.genes.python import LogSink
    from rotifer.memory import GeneMemoryAccess

#: Startup of the child (the fork server's, the fork, confinement) is not the
#: gene's time: its deadline starts when the child says it is ready, within this.
STARTUP_ALLOWANCE_S = 60.0


def _decode(doc: Any) -> Any:
    """Inverse of the child's ``_arg``: ``$bytes`` back to bytes, ``$type`` to a
    stand-in of that type's name (so the store names it in its refusal)."""
    if isinstance(doc, dict):
        # One-key objects tested by size first, not ``set(doc) == {...}`` (a
        # set built for every argument), and base64 decoded by binascii at
        # once (``b64decode`` without ``validate`` is exactly this call).
        if len(doc) == 1:
            if type(got := doc.get("$bytes")) is str:
                return binascii.a2b_base64(got)
            if type(got := doc.get("$type")) is str:
                return type(got, (), {})()
        return {k: _decode(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_decode(v) for v in doc]
    return doc


def _fields(args: object) -> dict[str, Any]:
    """A call's ``args`` object, its values decoded: the call's fields."""
    if not isinstance(args, dict):
        raise invalid("a memory call's arguments must be an object")
    return {k: _decode(v) for k, v in args.items()}


#: The child's spelling of the four calls (pychild.BridgeMemory).
OPS = {"read": Op.READ, "write": Op.WRITE, "query": Op.QUERY, "delete": Op.DELETE}


def _reply(memory: GeneMemoryAccess, message: dict[str, Any]) -> dict[str, Any] | bytes:
    op = OPS[message["op"]]  # one of OPS: the channel accepts no other (CALLS)
    try:
        result = serve(memory, op, _fields, message.get("args"))
    except AgentMemoryError as exc:
        return error_reply(exc)
    # A read's or write's entry goes in the short form (contain/replies.py).
    if result is None:
        return NOTHING
    if isinstance(result, MemoryEntry):
        line = entry_line(result, with_value=op is Op.READ)
        if line is not None:
            return line
    return ok_reply(result)


def _error(gene: Gene, message: dict[str, Any]) -> Exception:
    kind, text = message.get("kind"), str(message.get("message", ""))
    if kind == "memory":
        try:
            return AgentMemoryError(str(message.get("code")), text)
        except ValueError:
            return GeneFailed(f"gene '{gene.name}' raised MemoryError with an unknown code")
    if kind == "rejected":
        return GeneRejected(str(message.get("code") or ""), text)
    if kind == "invalid":
        return InvalidGene(text)
    return GeneFailed(text)


#: What the child may send (contain/channel.py's allowlist): the four calls,
#: and these kinds of error.  No kind says the run was interrupted: a gene's
#: own KeyboardInterrupt (even from a SIGINT it sent its own process) is its
#: failure; the user's Ctrl-C reaches rotifer, never the child (its own session).
CALLS = Shape(frozenset({"type", "op", "args"}), frozenset(OPS))
ERRORS = frozenset({"memory", "rejected", "invalid", "failed"})


def run_contained(gene: Gene, input: Any, memory: GeneMemoryAccess, *, deadline_s: float,
                  agent: str | None, log_sink: LogSink | None, grant: Grant,
                  max_output: int = MAX_OUTPUT_BYTES, check: bool = False) -> Any:
    """Run a Python gene in a confined child; the same results and errors as
    :func:`rotifer.genes.python.run_python_gene` (``check``: only load it)."""
    sink = log_sink or _stderr_sink
    try:
        code = gene.code.decode("utf-8")
    except UnicodeDecodeError:
        raise GeneFailed(f"gene '{gene.name}': {gene.code_file.name} is not UTF-8") from None
    read = [*python_read_paths(), str(gene.path)]
    refuse_exposed(gene.name, gene.path, [*SYSTEM_READ, *read])
    with sandbox(gene.name, read, grant) as box:
        request = {"cwd": str(gene.path), "env": box.env, "plan": box.plan.to_message()}

        def spawn(to_child: int, from_child: int, output: int) -> Child:
            return server().spawn(gene.name, request, (to_child, from_child, output),
                                  STARTUP_ALLOWANCE_S)

        channel = Channel(
            name=gene.name, what="Python", deadline_s=STARTUP_ALLOWANCE_S + deadline_s,
            spawn=spawn, on_output=lambda line: sink(gene.name, line), max_output=max_output,
            timeout_message=f"gene '{gene.name}' ran past its deadline of {deadline_s:g} s")
        try:
            return _converse(channel, gene, code, input, memory, deadline_s, agent, sink,
                             check)
        finally:
            channel.close()


def _converse(channel: Channel, gene: Gene, code: str, input: Any, memory: GeneMemoryAccess,
              deadline_s: float, agent: str | None, sink: LogSink,
              check: bool = False) -> Any:
    # The start message goes at once, before the child says it is ready: it
    # waits in the pipe until the child, confined by then, reads it -- one
    # wake-up of each process fewer a run.
    with contextlib.suppress(GeneFailed):  # it ended unread: what it said tells why
        channel.send({"type": "start", "code": code,
                      "codeFile": str(gene.code_file), "input": input, "agent": agent,
                      "check": check,
                      "gene": {"name": gene.name, "domain": gene.domain,
                               "version": gene.phenotype.version, "v2Id": gene.v2_id}})
    ready = channel.receive()
    if ready.get("type") == "error" and ready.get("kind") == "unconfined":
        raise GeneUnavailable(f"gene '{gene.name}': the Python process could not be confined "
                              f"({ready.get('message')}); run `rotifer doctor` to see what "
                              "this machine can enforce")
    if ready.get("type") != "ready":
        raise GeneFailed(f"gene '{gene.name}': the Python process did not start")
    channel.restart_deadline(deadline_s)
    return channel.converse(lambda message: _reply(memory, message),
                            lambda message: _error(gene, message),
                            lambda line: sink(gene.name, line), calls=CALLS, errors=ERRORS)


def _stderr_sink(name: str, line: str) -> None:
    print(f"[{name}] {line}", file=sys.stderr)
