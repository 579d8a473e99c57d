"""A TCP relay the bridge reaches PostgreSQL through, so a test can cut the link.

`blackhole()` stops relaying in both directions (bytes wait in kernel buffers, no
peer sees an error: a partition), `heal()` resumes, `reset()` aborts every
connection with RST (a link dropped by a firewall or a crashed NAT). Namespaces
would cut the kernel path too; a relay needs no privileges and cuts the same bytes.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading

LINGER_RST = struct.pack("ii", 1, 0)


class Relay:
    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, name="relay-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peer = {client: server, server: client}
        with selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ)
            sel.register(server, selectors.EVENT_READ)
            with contextlib.suppress(OSError, ValueError):
                while not self._closed.is_set():
                    if not self._flowing.wait(0.1):
                        continue
                    for key, _ in sel.select(0.1):
                        src: socket.socket = key.fileobj  # type: ignore[assignment]
                        data = src.recv(65536)
                        if not data:
                            return self._abort(client, server, rst=False)
                        peer[src].sendall(data)

    @staticmethod
    def _abort(client: socket.socket, server: socket.socket, rst: bool) -> None:
        for sock in (client, server):
            with contextlib.suppress(OSError):
                if rst:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
                sock.close()

    def blackhole(self) -> None:
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def reset(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            self._abort(client, server, rst=True)

    def close(self) -> None:
        self._closed.set()
        self.reset()
        self._listener.close()
