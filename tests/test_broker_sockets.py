"""bridge/kafka/sockets.py: finding this process's broker connections and making them
abort (RST, unsent data dropped) when closed; on loopback sockets of the test's own."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import pytest

from bridge.kafka.acks import AckTracker
from bridge.kafka.producer import Producer
from bridge.kafka.sockets import BrokerSockets, endpoint, stats_endpoints


def test_endpoints_from_bootstrap_entries_and_statistics() -> None:
    assert endpoint("broker-1:9092") == ("broker-1", 9092)
    assert endpoint("SSL://[::1]:9093") == ("::1", 9093)
    assert endpoint("no-port") is None
    stats = {"brokers": {"b:9092/1": {"nodename": "b:9092"}, "x/bootstrap": {"nodename": ""}}}
    assert stats_endpoints(json.dumps(stats)) == {("b", 9092)}
    assert stats_endpoints("not json") == set()


@pytest.fixture
def connected() -> tuple[socket.socket, socket.socket, int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    return server, client, port


def test_a_broker_connection_is_armed_once_and_others_are_left_alone(
    connected: tuple[socket.socket, socket.socket, int],
) -> None:
    server, client, port = connected
    other = socket.create_server(("127.0.0.1", 0))
    bystander = socket.create_connection(other.getsockname())
    with server, client, other, bystander:
        sockets = BrokerSockets(f"localhost:{port}")
        assert sockets.arm() == 1
        assert sockets.arm() == 0  # already armed
        linger = struct.unpack("ii", client.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))
        assert linger == (1, 0)
        untouched = bystander.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8)
        assert struct.unpack("ii", untouched) == (0, 0)


def test_a_broker_named_only_in_statistics_is_armed(
    connected: tuple[socket.socket, socket.socket, int],
) -> None:
    server, client, port = connected
    with server, client:
        sockets = BrokerSockets("elsewhere.invalid:1")
        assert sockets.arm() == 0
        sockets.learn(json.dumps({"brokers": {"1": {"nodename": f"127.0.0.1:{port}"}}}))
        linger = struct.unpack("ii", client.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))
        assert linger == (1, 0)


def test_an_armed_connection_closes_with_a_reset(
    connected: tuple[socket.socket, socket.socket, int],
) -> None:
    """What the module is for: the peer sees a RST, not an orderly end after the data."""
    server, client, port = connected
    with server:
        peer, _ = server.accept()
        with peer:
            BrokerSockets(f"127.0.0.1:{port}").arm()
            client.close()
            with pytest.raises(ConnectionResetError):
                peer.recv(1)


def _linger(sock: socket.socket) -> tuple[int, int]:
    on, seconds = struct.unpack("ii", sock.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))
    return on, seconds


def test_tick_arms_a_connection_made_since_the_last_pass_once_a_second() -> None:
    """A reconnect between statistics reports: armed by the poll path within a second."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    now = [100.0]
    sockets = BrokerSockets(f"127.0.0.1:{port}", interval_s=1.0, clock=lambda: now[0])
    with server, socket.create_connection(("127.0.0.1", port)) as first:
        assert sockets.tick() == 1
        with socket.create_connection(("127.0.0.1", port)) as second:
            now[0] += 0.5
            assert sockets.tick() == 0  # not yet: at most one pass a second
            assert _linger(second) == (0, 0)
            now[0] += 0.5
            assert sockets.tick() == 1
            assert _linger(second) == (1, 0)
            assert _linger(first) == (1, 0)


def test_a_connection_to_a_broker_named_later_is_armed_then(
    connected: tuple[socket.socket, socket.socket, int],
) -> None:
    """A connection passed over as not a broker's is looked at again once a report names it."""
    server, client, port = connected
    with server, client:
        sockets = BrokerSockets("elsewhere.invalid:1", interval_s=0.0)
        assert sockets.tick() == 0
        assert sockets.tick() == 0
        sockets.learn(json.dumps({"brokers": {"1": {"nodename": f"127.0.0.1:{port}"}}}))
        assert _linger(client) == (1, 0)


class _IdleClient:
    """A librdkafka client that never calls back: only the socket arming is under test."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf

    def produce(self, *args: Any, **kwargs: Any) -> None:
        pass

    def poll(self, timeout: float) -> int:
        return 0

    def purge(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_producer_arms_new_broker_connections_when_polled(
    connected: tuple[socket.socket, socket.socket, int],
) -> None:
    """No statistics report between the connection and the poll: the poll path arms it."""
    server, client, port = connected
    producer = Producer(
        {"bootstrap.servers": f"127.0.0.1:{port}"}, AckTracker(), client=_IdleClient
    )
    with server, client:
        assert _linger(client) == (0, 0)
        producer.poll()
        assert _linger(client) == (1, 0)
        producer.close()
