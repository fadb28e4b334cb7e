"""A TCP relay between a broker and ZooKeeper that stops ZooKeeper's answers once the broker has sent a
chosen request, to keep a broker at one step of its start-up without a test-only branch in the broker.

    with ZooKeeperGate(zk_server.connect) as gate:
        broker = BrokerProcess(tmp_path, {"zookeeper.connect": gate.connect + chroot, ...})
        ...
        gate.close_after(b"/brokers/ids/1")  # the next request naming that path reaches ZooKeeper (a create
        ...                                   # happens), but neither its answer nor any later one comes back
        gate.release()                        # the answers held go on, in order

Requests are matched on their bytes: arm the gate once the broker's earlier requests naming the same
path are answered. Hold for less than two thirds of the broker's session timeout: a ZooKeeper client
that hears nothing for that long drops its connection.
"""

from __future__ import annotations

import socket
import threading


class ZooKeeperGate:
    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._answers_flow = threading.Event()
        self._answers_flow.set()
        self._lock = threading.Lock()
        self._trigger: bytes | None = None  # a request with these bytes closes the gate
        self.closed_on = threading.Event()  # set once a request closed it
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="zookeeper-gate").start()

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close_after(self, request_bytes: bytes) -> None:
        with self._lock:
            self._trigger = request_bytes
            self.closed_on.clear()

    def release(self) -> None:
        with self._lock:
            self._trigger = None
        self._answers_flow.set()

    def _accept(self) -> None:
        while True:
            try:
                broker_side, _ = self._listener.accept()
            except OSError:  # the gate was closed
                return
            try:
                zookeeper_side = socket.create_connection(self._upstream, timeout=10)
                zookeeper_side.settimeout(None)
            except OSError:
                broker_side.close()
                continue
            with self._lock:
                self._sockets += [broker_side, zookeeper_side]
            threading.Thread(target=self._requests, args=(broker_side, zookeeper_side), daemon=True).start()
            threading.Thread(target=self._answers, args=(zookeeper_side, broker_side), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        tail = b""  # the end of the previous chunk: a trigger split between two reads is still seen
        try:
            while data := source.recv(65536):
                with self._lock:
                    trigger = self._trigger
                    if trigger is not None and trigger in tail + data:
                        self._answers_flow.clear()  # before the request goes: its answer is held
                        self._trigger = None
                        self.closed_on.set()
                    tail = (tail + data)[-len(trigger):] if trigger else b""
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _end(source, sink)

    def _answers(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._answers_flow.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _end(source, sink)

    def __enter__(self) -> ZooKeeperGate:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        _end(self._listener)
        with self._lock:
            _end(*self._sockets)


def _end(*sockets: socket.socket) -> None:
    """Shut down (which wakes a thread blocked on the socket) and close."""
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
