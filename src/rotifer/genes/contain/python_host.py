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
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

from rotifer.genes.errors import GeneFailed, GeneRejected, GeneUnavailable, InvalidGene
from rotifer.memory import UNSET, AccessPolicy, AgentMemoryError, GeneMemoryAccess, MemoryEntry

from .channel import MAX_OUTPUT_BYTES, Channel, Child
from .exposure import refuse_exposed
from .forkserver import server
from .protocol import Shape
from .sandbox import SYSTEM_READ, Grant, python_read_paths, sandbox

if TYPE_CHECKING:
    from rotifer.genes.gene import Gene
    from rotifer.genes.python import LogSink

#: Startup of the child (the fork server's, the fork, confinement) is not the
#: gene's time: its deadline starts when the child says it is ready, within this.
STARTUP_ALLOWANCE_S = 60.0


def _decode(doc: Any) -> Any:
    """Inverse of the child's ``_arg``: ``$bytes`` back to bytes, ``$type`` to a
    stand-in of that type's name (so the store names it in its refusal)."""
    if isinstance(doc, dict):
        # One-key objects tested by size first, not ``set(doc) == {...}`` (a
        # set built for every argument), and base64 decoded by binascii at
        # once (``b64decode`` without ``validate`` is exactly this call):
        # a write's four arguments 1.4 -> 0.6 us.
        if len(doc) == 1:
            if type(got := doc.get("$bytes")) is str:
                return binascii.a2b_base64(got)
            if type(got := doc.get("$type")) is str:
                return type(got, (), {})()
        return {k: _decode(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_decode(v) for v in doc]
    return doc


def serve(memory: GeneMemoryAccess, op: object, args: object) -> Any:
    """Carry out one memory call; the store's answer (an entry, a list of
    entries, or None), which :func:`_reply` puts into the reply."""
    if not isinstance(args, dict):
        raise TypeError("a memory call's arguments must be an object")
    a = {k: _decode(v) for k, v in args.items()}
    if op == "read":
        return memory.read_memory(a.get("key"), a.get("category"))  # type: ignore[arg-type]
    if op == "write":
        return memory.write_memory(a.get("key"), a.get("value"), a.get("category"),  # type: ignore[arg-type]
                                   a.get("accessPolicy"), a.get("retentionPolicy", UNSET))
    if op == "query":
        return memory.query_memory(a.get("filter"))
    if op == "delete":
        memory.delete_memory(a.get("key"))  # type: ignore[arg-type]
        return None
    raise TypeError(f"unknown memory call {op!r}")


#: An entry a read or write returns, answered as one line built from a
#: template instead of ``{"ok": entry.to_json()}`` through the encoder: a
#: JSON array of the fields in this order, without the key (the child asked
#: for it) and, for a write, without the value (``null``: the child sent it).
#: Building it 5.8 -> 1.4 us, and the child decodes an array of strings
#: faster than the object.  An entry with a retention policy goes as the
#: full object (``_reply``'s other path); pychild._compact reads this.
_ENTRY_LINE = '{"ok":[%s,"%s",%s,%s,%s,%s,%s,%s]}\n'
_quote = encode_basestring_ascii
#: The three scopes of an access policy as JSON, by the policy object (the
#: store hands out one shared object per combination: memory/rows.py), so
#: the enums' ``value`` properties are read once: ~0.6 us an entry.
_POLICY_JSON: dict[int, tuple[AccessPolicy, str]] = {}


def _policy_json(policy: AccessPolicy) -> str:
    got = _POLICY_JSON.get(id(policy))
    if got is not None and got[0] is policy:
        return got[1]
    text = (f'"{policy.read_scope.value}","{policy.write_scope.value}",'
            f'"{policy.share_policy.value}"')
    if len(_POLICY_JSON) >= 256:  # at most 48 combinations, unless copies
        _POLICY_JSON.clear()
    _POLICY_JSON[id(policy)] = (policy, text)  # kept alive: its id stays its own
    return text


def _entry_line(entry: MemoryEntry, with_value: bool) -> bytes | None:
    """The reply carrying ``entry`` (see :data:`_ENTRY_LINE`); None when it has
    a retention policy (then it goes as the full object)."""
    if entry.retention_policy is not None:
        return None
    value = ('"' + binascii.b2a_base64(entry.value, newline=False).decode("ascii") + '"'
             if with_value else "null")
    return (_ENTRY_LINE % (
        _quote(entry.entry_id), entry.category.value, value, _quote(entry.created_by),
        _quote(entry.last_accessed_by), _quote(entry.created_at), _quote(entry.updated_at),
        _policy_json(entry.access_policy))).encode("ascii")


def _reply(memory: GeneMemoryAccess, message: dict[str, Any]) -> dict[str, Any] | bytes:
    try:
        op = message.get("op")
        result = serve(memory, op, message.get("args"))
        # An entry (a read or a write) is answered with a line built at once
        # (_entry_line); a list of entries (a query) as JSON objects.
        if result is None:
            return _NOTHING
        if isinstance(result, MemoryEntry):
            line = _entry_line(result, op == "read")
            return {"ok": result.to_json()} if line is None else line
        return {"ok": [e.to_json() for e in result]}
    except AgentMemoryError as exc:
        return {"error": exc.to_json()}
    except (TypeError, ValueError, AttributeError) as exc:  # arguments of the wrong shape
        return {"error": {"code": "MEMORY_INVALID_INPUT", "message": str(exc)}}


#: A read that found nothing, or a delete.
_NOTHING = b'{"ok":null}\n'


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
CALLS = Shape(frozenset({"type", "op", "args"}), frozenset({"read", "write", "query", "delete"}))
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
    # wake-up of each process fewer a run (milliseconds on a loaded machine).
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
