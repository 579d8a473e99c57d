"""source.host with several servers: parsing and the libpq keywords it becomes."""

from __future__ import annotations

import pytest

from bridge.config import Config
from bridge.hosts import Endpoint, libpq_params, parse_hosts


def test_each_host_may_carry_its_own_port() -> None:
    assert parse_hosts("a, b:5433,[::1]:6000,[fe80::1]", 5432) == (
        Endpoint("a", 5432),
        Endpoint("b", 5433),
        Endpoint("::1", 6000),
        Endpoint("fe80::1", 5432),
    )


@pytest.mark.parametrize("text", ["a,,b", "a:0", "a:x", "[::1", "a:70000"])
def test_bad_host_lists_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_hosts(text, 5432)


def test_several_hosts_connect_to_the_primary_by_default() -> None:
    params = libpq_params(parse_hosts("a:1,b:2", 5432), None)
    assert params == {"host": "a,b", "port": "1,2", "target_session_attrs": "primary"}
    one = libpq_params(parse_hosts("a", 5432), None)
    assert one == {"host": "a", "port": 5432}
    assert libpq_params(parse_hosts("a,b", 7), "standby")["target_session_attrs"] == "standby"


def test_config_builds_a_multi_host_conninfo() -> None:
    cfg = Config(source={"host": "pg-0.pg,pg-1.pg:5433", "port": 5432})
    info = cfg.source.conninfo(replication=True)
    assert (info["host"], info["port"], info["target_session_attrs"]) == (
        "pg-0.pg,pg-1.pg",
        "5432,5433",
        "primary",
    )
    assert info["replication"] == "database"
