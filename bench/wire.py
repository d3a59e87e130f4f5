"""A counting TCP relay in front of PostgreSQL: round trips seen on the wire.

The store talks to the relay as if it were the server; the relay passes every
byte on unchanged and reads the client's side of the protocol as it goes.
After the startup packets (``SSLRequest``/``GSSENCRequest``, answered ``N``
by our server, then the ``StartupMessage``), every frontend message is a type
byte and a length.  Counted:

- **round trips**: ``Q`` (a simple query), ``S`` (``Sync``, which ends an
  extended-protocol exchange: the client then waits for ``ReadyForQuery``) and
  ``H`` (``Flush``: the server answers what it has run so far, and the client
  waits for it -- rotifer's first round trip of a change; not one sent right
  after a ``Sync``, as psycopg's pipeline ends, which waits for nothing more).
  psycopg without a pipeline sends one per ``execute``, plus one when it first
  prepares a statement;
- **statements**: ``E`` (``Execute``) messages, and the statements of each ``Q``
  (its text split at ``;``: rotifer's SQL has no ``;`` inside literals).

A message is counted *before* it is passed on, so once a call has returned,
everything it sent has been counted.  No timing is done through the relay.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections import Counter
from contextlib import suppress

STARTUP_REQUESTS = {80877103, 80877104}  # SSLRequest, GSSENCRequest


class Relay:
    """``Relay(server_port)``; point the store at ``127.0.0.1:relay.port``."""

    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.messages: Counter[str] = Counter()
        self.texts: list[str] = []  # the SQL of every Parse and Query, in order
        #: For each of ``texts``: the round trips sent before it, so texts with
        #: the same number travelled in one round trip (a pipeline).
        self.trip_of: list[int] = []
        #: The name of every Parse, in order ("": an unnamed statement, not prepared).
        self.names: list[str] = []
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def snapshot(self) -> tuple[int, int, int]:
        """(round trips, statements, SQL texts so far)."""
        with self.lock:
            m = self.messages
            return m["Q"] + m["S"] + m["H"], m["Q;"] + m["E"], len(self.texts)

    def close(self) -> None:
        for s in self.sockets:
            with suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.server_port))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sockets += [client, server]
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()
            threading.Thread(target=self._frontend, args=(client, server), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _frontend(self, src: socket.socket, dst: socket.socket) -> None:
        buf = b""
        previous = ""
        startup = True
        with suppress(OSError):
            while data := src.recv(65536):
                buf += data
                while True:
                    if startup:
                        if len(buf) < 8:
                            break
                        length, code = struct.unpack("!ii", buf[:8])
                        if len(buf) < length:
                            break
                        buf = buf[length:]
                        startup = code in STARTUP_REQUESTS
                        continue
                    if len(buf) < 5:
                        break
                    kind, length = chr(buf[0]), struct.unpack("!i", buf[1:5])[0]
                    if len(buf) < 1 + length:
                        break
                    body, buf = buf[5:1 + length], buf[1 + length:]
                    if kind == "H" and previous == "S":
                        kind = "h"  # a Flush right after a Sync waits for nothing more
                    previous = kind
                    self._count(kind, body)
                dst.sendall(data)
        with suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _count(self, kind: str, body: bytes) -> None:
        with self.lock:
            trips = self.messages["Q"] + self.messages["S"] + self.messages["H"]
            self.messages[kind] += 1
            if kind == "Q":
                text = body.rstrip(b"\0").decode(errors="replace")
                self.texts.append(text)
                self.trip_of.append(trips)
                self.messages["Q;"] += sum(1 for part in text.split(";") if part.strip())
            elif kind == "P":
                name, text = body.split(b"\0")[:2]
                self.texts.append(text.decode(errors="replace"))
                self.names.append(name.decode(errors="replace"))
                self.trip_of.append(trips)
