"""The child side of a contained Python gene: a process forked from the fork
server (:mod:`rotifer.genes.contain.zygote`) and already confined (Landlock,
seccomp, rlimits), that reads one start message, runs ``express(input, ctx)``
exactly as an in-process run would (:func:`rotifer.genes.python.run_in_process`),
and serves ``ctx.memory``'s four synchronous calls by asking the parent.

Protocol (one JSON object a line; the child reads descriptor 3 and writes 4,
and ``sys.argv`` ends with those two numbers as a fresh ``python -c`` would):
parent -> child ``{"type": "start", ...}``, then one ``{"ok": ...}`` or
``{"error": {"code", "message"}}`` per call (a read's or write's entry
usually in a short form, an array without the key and a write's value:
:mod:`.replies`); child -> parent ``{"type":
"ready"}``, ``{"type": "call", "op", "args"}``, ``{"type": "log", "line"}``, and
last ``{"type": "result", "output"}`` or ``{"type": "error", "kind", ...}``.
Arguments cross as JSON, bytes as ``{"$bytes": base64}``, anything else as
``{"$type": name}`` so the store refuses it with the same message as in process.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import json
import os
import select
import sys
from json.encoder import encode_basestring_ascii
from typing import Any

from rotifer.genes.errors import GeneFailed, GeneRejected, InvalidGene
from rotifer.genes.python import GeneInfo, run_in_process
from rotifer.memory import UNSET, AgentMemoryError, Category, MemoryEntry
from rotifer.memory.model import stored_entry
from rotifer.memory.storage.rows import CATEGORIES, POLICIES, access_policy_of

from .jsonline import decode
from .replies import ShortEntry
from .spin import Spinner

#: One encoder for every message (``json.dumps`` with an argument builds one each time).
_ENCODE = json.JSONEncoder(allow_nan=False).encode
#: ``json.loads`` of bytes guesses their encoding first, every message; the
#: C scanner called at once (contain/jsonline.py) is quicker still.
_DECODE = decode


def _arg(value: Any) -> Any:
    """A call argument as JSON the parent decodes back (see the module docstring)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, enum.Enum):
        return _arg(value.value)
    if isinstance(value, list | tuple):
        return [_arg(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _arg(v) for k, v in value.items()}
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return _arg(to_json())
    return {"$type": type(value).__name__}


_TEXT_FIELDS = ("entryId", "key", "createdBy", "lastAccessedBy", "createdAt", "updatedAt")


def _entry(doc: Any) -> MemoryEntry:
    """``MemoryEntry.from_json(doc)`` of an entry the parent sent, built quicker.

    The usual entry (no retention policy, every field of the usual type) is
    built from the store's own tables of categories and access policies
    (:mod:`rotifer.memory.storage.rows`, every valid one made at import); any other goes
    through ``from_json``, which checks it and raises what it raises."""
    try:
        policy_doc = doc["accessPolicy"]
        policy = POLICIES[policy_doc["readScope"], policy_doc["writeScope"],
                           policy_doc["sharePolicy"]]
        texts = [doc[f] for f in _TEXT_FIELDS]
        if (doc["retentionPolicy"] is not None or len(doc) != 10 or len(policy_doc) != 3
                or not all(type(t) is str for t in texts)):
            raise KeyError  # not the usual entry
        value = binascii.a2b_base64(doc["value"], strict_mode=True)
        category = CATEGORIES[doc["category"]]
    except (KeyError, TypeError, ValueError):  # binascii.Error is a ValueError
        return MemoryEntry.from_json(doc)
    entry_id, key, created_by, last_accessed_by, created_at, updated_at = texts
    return stored_entry(entry_id, category, key, value, created_by, last_accessed_by,
                        created_at, updated_at, policy, None)


def _compact(doc: list[Any], key: str, value: bytes | None) -> MemoryEntry:
    """The entry of a read's or write's reply in the parent's short form
    (:class:`~rotifer.genes.contain.replies.ShortEntry`: the fields without
    the key, and a write's without the value)."""
    short = ShortEntry(*doc)
    if short.value is not None:
        value = binascii.a2b_base64(short.value)
    elif value is None:  # pragma: no cover - the parent answers a write only with its value sent
        raise RuntimeError("the bridge answered without the entry's value")
    return stored_entry(short.entry_id, CATEGORIES[short.category], key, value,
                        short.created_by, short.last_accessed_by, short.created_at,
                        short.updated_at,
                        access_policy_of(short.read_scope, short.write_scope,
                                         short.share_policy), None)


def _as_received(sent: Any) -> Any:
    """A call argument as the parent decoded it (a ``str`` subclass: a plain ``str``)."""
    return sent if type(sent) is str else _DECODE(_ENCODE(sent))


def _bytes_sent(sent: Any) -> bytes | None:
    """The bytes an argument ``_arg`` encoded carried to the parent, if any."""
    if isinstance(sent, dict) and type(got := sent.get("$bytes")) is str:
        return base64.b64decode(got)
    return None


#: What the encoder makes of a string: quoted, escaped to ASCII.
_quote = encode_basestring_ascii
#: The usual write (a ``str`` key, ``bytes``, a category, no policy given) and
#: read (no category) as a line from a template, not a dict of ``_arg``s
#: through the encoder (docs/benchmarks.md, "Containment", has the figures).
_WRITE_LINE = ('{"type":"call","op":"write","args":{"key":%s,"value":{"$bytes":"%s"},'
               '"category":%s,"accessPolicy":null}}\n')
_READ_LINE = '{"type":"call","op":"read","args":{"key":%s,"category":null}}\n'


class _Pipe:
    """The child's end of the bridge.  A reply is read with
    :class:`~rotifer.genes.contain.spin.Spinner` first (the parent often
    answers within its spin) and only then waited for in ``poll``; there is
    no deadline here -- the parent's kills the child."""

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._buffer = bytearray()
        self._spinner = Spinner()
        self._poll = select.poll()
        self._poll.register(in_fd, select.POLLIN)

    # The descriptor stays blocking (a gene may read it itself, as the hostile
    # suite's forger does): readiness is asked of ``poll`` with no timeout.
    def _read_now(self) -> bytes | None:
        return os.read(self.in_fd, 1 << 16) if self._poll.poll(0) else None

    def _read_waiting(self) -> bytes:
        self._poll.poll()
        return os.read(self.in_fd, 1 << 16)

    def send(self, message: dict[str, Any]) -> None:
        self.send_line((_ENCODE(message) + "\n").encode())

    def send_line(self, line: bytes) -> None:
        data = memoryview(line)
        while data:
            data = data[os.write(self.out_fd, data):]

    def receive(self) -> Any:
        # A bytearray grown in place, searched only where a chunk landed: a
        # start message of many megabytes is read in linear time.
        buffer = self._buffer
        at = buffer.find(b"\n")
        while at < 0:
            chunk = self._spinner.wait(self._read_now, self._read_waiting)
            if not chunk:
                raise SystemExit(0)  # the parent is gone: nothing left to do
            at = chunk.find(b"\n")
            if at >= 0:
                at += len(buffer)
            buffer += chunk
        line = buffer[:at].decode("ascii")  # the parent writes ASCII JSON
        del buffer[:at + 1]
        return _DECODE(line)


class BridgeMemory:
    """``ctx.memory`` in the child: each call is one round trip to the parent,
    which checks every rule and answers as the gene it started on this pipe."""

    def __init__(self, pipe: _Pipe) -> None:
        self._pipe = pipe

    def _ask(self, line: bytes) -> Any:
        self._pipe.send_line(line)
        reply = self._pipe.receive()
        if "error" in reply:
            raise AgentMemoryError(reply["error"]["code"], reply["error"]["message"])
        return reply["ok"]

    def _call(self, op: str, args: dict[str, Any]) -> Any:
        return self._ask((_ENCODE({"type": "call", "op": op, "args": args}) + "\n").encode())

    def read_memory(self, key: str, category: Any = None) -> MemoryEntry | None:
        if type(key) is str and category is None:
            doc = self._ask((_READ_LINE % _quote(key)).encode())
        else:
            sent = _arg(key)
            doc = self._call("read", {"key": sent, "category": _arg(category)})
            key = _as_received(sent)
        if doc is None:
            return None
        return _compact(doc, key, None) if type(doc) is list else _entry(doc)

    def write_memory(self, key: str, value: bytes, category: Any,
                     access_policy: Any = None, retention_policy: Any = UNSET) -> MemoryEntry:
        if (type(key) is str and type(value) is bytes and access_policy is None
                and retention_policy is UNSET
                and (type(category) is str or type(category) is Category)):
            doc = self._ask((_WRITE_LINE % (
                _quote(key), binascii.b2a_base64(value, newline=False).decode("ascii"),
                _quote(category.value if type(category) is Category else category))).encode())
            data: bytes | None = value
        else:
            args = {"key": _arg(key), "value": _arg(value), "category": _arg(category),
                    "accessPolicy": _arg(access_policy)}
            if retention_policy is not UNSET:
                args["retentionPolicy"] = _arg(retention_policy)
            doc = self._call("write", args)
            key, data = _as_received(args["key"]), _bytes_sent(args["value"])
        # The parent's short reply leaves the value out: it is what was sent.
        return _compact(doc, key, data) if type(doc) is list else _entry(doc)

    def query_memory(self, filter: Any = None) -> list[MemoryEntry]:
        return [_entry(d) for d in self._call("query", {"filter": _arg(filter)})]

    def delete_memory(self, key: str) -> None:
        self._call("delete", {"key": _arg(key)})


class CodeFile(str):
    """The gene's code file: its path, and its ``name`` as :class:`pathlib.Path`
    has it (pathlib is the fork server's import to spare: ~6% of its start)."""

    @property
    def name(self) -> str:
        return self.rpartition("/")[2]


class _Source:
    def __init__(self, name: str, code: bytes, code_file: CodeFile) -> None:
        self.name, self.code, self.code_file = name, code, code_file


def main(in_fd: int, out_fd: int) -> None:
    """Run the gene the parent's start message names; the last message is its
    result or its error.  stdout and stderr are flushed before that message, so
    what the gene wrote there is passed on before the parent ends the run."""
    pipe = _Pipe(in_fd, out_fd)
    pipe.send({"type": "ready"})
    start = pipe.receive()
    gene = start["gene"]
    source = _Source(gene["name"], start["code"].encode(),
                     CodeFile(start["codeFile"]))
    info = GeneInfo(name=gene["name"], domain=gene["domain"], version=gene["version"],
                    v2_id=gene["v2Id"])

    def log(name: str, line: str) -> None:
        pipe.send({"type": "log", "line": line})

    last: dict[str, Any]
    try:
        output = run_in_process(source, info, start["input"], BridgeMemory(pipe),
                                deadline_s=0, agent=start["agent"], log_sink=log,
                                check=bool(start.get("check")))
    except AgentMemoryError as exc:
        last = {"type": "error", "kind": "memory", "code": exc.code.value,
                "message": exc.message}
    except GeneRejected as exc:
        last = {"type": "error", "kind": "rejected", "code": exc.code, "message": exc.message}
    except InvalidGene as exc:
        last = {"type": "error", "kind": "invalid", "message": exc.message}
    except GeneFailed as exc:
        last = {"type": "error", "kind": "failed", "message": exc.message}
    except KeyboardInterrupt:  # a SIGINT the gene sent its own process: the user's never reaches it
        last = {"type": "error", "kind": "failed",
                "message": f"gene '{gene['name']}' was interrupted by a signal to its own process"}
    else:
        last = {"type": "result", "output": output}
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a gene may have replaced or closed them
            stream.flush()
    pipe.send(last)
