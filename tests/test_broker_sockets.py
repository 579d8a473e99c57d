"""bridge/kafka/sockets.py: finding this process's broker connections and making them
abort (RST, unsent data dropped) when closed; on loopback sockets of the test's own."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from bridge.kafka.sockets import BrokerSockets, endpoint, peers_by_inode, stats_endpoints


def test_endpoints_from_bootstrap_entries_and_statistics() -> None:
    assert endpoint("broker-1:9092") == ("broker-1", 9092)
    assert endpoint("SSL://[::1]:9093") == ("::1", 9093)
    assert endpoint("no-port") is None
    stats = {"brokers": {"b:9092/1": {"nodename": "b:9092"}, "x/bootstrap": {"nodename": ""}}}
    assert stats_endpoints(json.dumps(stats)) == {("b", 9092)}
    assert stats_endpoints("not json") == set()


def test_proc_net_tcp_lines() -> None:
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:A1B2 0100007F:2384 01 00000000:00000000 00:00000000 00000000     0 "
        "       0 424242 1 0000000000000000 20 4 30 10 -1\n"
    )
    assert list(peers_by_inode(table)) == [(424242, ("127.0.0.1", 0x2384))]


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
