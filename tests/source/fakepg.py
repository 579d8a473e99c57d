"""A stand-in PostgreSQL server for the unit tests of `bridge.source.libpq`: real libpq
(through psycopg) on one side, a few bytes of the v3 wire protocol on the other.

It answers the start-up of every connection (trust authentication), then hands each
query to `answer`, which returns the bytes to send back, or None to go silent on that
connection the way a frozen server does (the kernel still takes what is sent). Cancel
requests are counted; with `takes_cancel` a silent query then gets PostgreSQL's answer
to a cancelled statement (57014). `mute` answers not even the start-up.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
_PID, _KEY = 4242, 99


def message(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack(">I", len(payload) + 4) + payload


def ready() -> bytes:
    return message(b"Z", b"I")


def error(code: str, text: str) -> bytes:
    fields = b"".join(
        k + v.encode() + b"\0" for k, v in ((b"S", "ERROR"), (b"C", code), (b"M", text))
    )
    return message(b"E", fields + b"\0")


def rows(*values: str) -> bytes:
    """A one-column text result of `values`, then ReadyForQuery."""
    head = b"\0\x01" + b"v\0" + struct.pack(">IhIhih", 0, 0, 25, -1, -1, 0)
    out = message(b"T", head)
    for v in values:
        out += message(b"D", b"\0\x01" + struct.pack(">I", len(v)) + v.encode())
    return out + message(b"C", f"SELECT {len(values)}".encode() + b"\0") + ready()


def copy_out(*lines: bytes) -> bytes:
    """A COPY TO STDOUT of `lines` (one column, text), then ReadyForQuery."""
    out = message(b"H", b"\0\0\x01\0\0")
    for line in lines:
        out += message(b"d", line)
    return out + message(b"c") + message(b"C", f"COPY {len(lines)}".encode() + b"\0") + ready()


class FakeServer:
    def __init__(
        self,
        answer: Callable[[bytes], bytes | None],
        *,
        takes_cancel: bool = False,
        mute: bool = False,
    ) -> None:
        self._answer = answer
        self._takes_cancel = takes_cancel
        self._mute = mute
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.cancels = 0
        self.startups = 0
        self.queries: list[bytes] = []
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def params(self, **more: Any) -> dict[str, Any]:
        return {
            "host": "127.0.0.1",
            "port": self.port,
            "user": "tester",
            "dbname": "fake",
            "sslmode": "disable",
            "gssencmode": "disable",
            "connect_timeout": 30,
            **more,
        }

    def close(self) -> None:
        self._done.set()
        self._cancelled.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        for sock in self._open:
            sock.close()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._open.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            if self._startup(sock):
                self._queries(sock)
        except OSError:
            pass  # the client went away

    def _startup(self, sock: socket.socket) -> bool:
        while True:
            (size,) = struct.unpack(">I", _read(sock, 4))
            body = _read(sock, size - 4)
            (code,) = struct.unpack(">I", body[:4])
            if code in (_SSL_REQUEST, _GSS_REQUEST):
                sock.sendall(b"N")
                continue
            if code == _CANCEL_REQUEST:
                self.cancels += 1
                if self._takes_cancel:
                    self._cancelled.set()
                    sock.close()
                return False  # a frozen server never closes it: libpq's cancel waits
            self.startups += 1
            if self._mute:
                return False
            settings = {
                "server_version": "16.0",
                "server_encoding": "UTF8",
                "client_encoding": "UTF8",
                "integer_datetimes": "on",
                "standard_conforming_strings": "on",
                "DateStyle": "ISO, MDY",
            }
            reply = message(b"R", struct.pack(">I", 0))
            for k, v in settings.items():
                reply += message(b"S", k.encode() + b"\0" + v.encode() + b"\0")
            sock.sendall(reply + message(b"K", struct.pack(">II", _PID, _KEY)) + ready())
            return True

    def _queries(self, sock: socket.socket) -> None:
        """Simple queries ('Q'), or the extended protocol up to its Sync, answered whole."""
        query = b""
        while True:
            kind = _read(sock, 1)
            (size,) = struct.unpack(">I", _read(sock, 4))
            body = _read(sock, size - 4)
            if kind == b"X":
                return
            if kind == b"P":
                query = body.split(b"\0", 2)[1]
            if kind not in (b"Q", b"S"):
                continue
            if kind == b"Q":
                query = body.rstrip(b"\0")
            self.queries.append(query)
            reply = self._answer(query)
            if reply is None:  # silent, as a frozen server is, unless a cancel comes
                self._cancelled.wait()
                if self._done.is_set():
                    return
                self._cancelled.clear()
                reply = error("57014", "canceling statement due to user request") + ready()
            elif kind == b"S":  # extended protocol: what Parse, Bind and Describe answer first
                reply = message(b"1") + message(b"2") + reply
            sock.sendall(reply)


def _read(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise OSError("closed")
        got += chunk
    return got
