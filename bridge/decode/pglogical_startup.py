"""pglogical_output negotiation: what we ask for, and whether the reply is acceptable.

The protocol has no handshake: the client sends its parameters with
START_REPLICATION and the server answers with a take-it-or-leave-it startup
message (`S`). `pglogical_options` builds the request and `check_startup` decides
whether the reply can be decoded, so a misconfigured server fails before any row
is read instead of producing garbage later.

Verified against pglogical 2.4 (`pglogical_output` plugin), which differs from
the protocol document in ways that matter here:

* it requires `pglogical.replication_set_names` (without it every table is
  filtered out and only empty BEGIN/COMMIT pairs arrive) and a pglogical node in
  the database (`pglogical.create_node`);
* it ignores `hooks.setup_function` and `relmeta_cache_size` and always caches
  relation metadata: an `R` message is sent once per relation per session (again
  after DDL), so the consumer must keep its own relation cache;
* it sends send/recv (`b`) values only when `binary.basetypes_major_version`
  equals its own `PG_VERSION_NUM / 100`, so the client must know the server
  version before asking for binary;
* `pglogical.forward_origins` accepts only `all`; without it transactions
  replayed from another origin are skipped;
* on PostgreSQL 15 its reply claims `binary.integer_datetimes=f` and
  `binary.float4_byval=f` (stale compile-time tests), so internal format is
  refused to any client declaring the truth; send/recv values are unaffected;
* the startup message is only sent with the first decoded transaction, not
  right after START_REPLICATION.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Mapping, Sequence

from bridge.decode.messages import Startup
from bridge.errors import ConfigError, ProtocolError

PROTO_VERSION_MIN = 1
PROTO_VERSION_MAX = 1
_ENCODING = "UTF8"

_TRUE = frozenset({"t", "true", "on", "yes", "y", "1"})
_FALSE = frozenset({"f", "false", "off", "no", "n", "0"})


def startup_flag(params: Mapping[str, str], key: str) -> bool:
    """A boolean startup parameter; absent means off, as the spec requires."""
    raw = params.get(key)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ProtocolError("S", 0, f"startup parameter {key}={raw!r} is not a boolean")


def _quote_ident(name: str) -> str:
    """Quote for the server's SplitIdentifierString, which lower-cases bare names."""
    if not name or "\0" in name:
        raise ConfigError(
            f"invalid pglogical name {name!r}",
            hint="replication set and origin names must be non-empty and contain no NUL",
        )
    return '"' + name.replace('"', '""') + '"'


def _bool(value: bool) -> str:
    return "true" if value else "false"


def pglogical_options(
    *,
    replication_sets: Sequence[str] | None = None,
    forward_origins: Sequence[str] | None = None,
    binary: bool = False,
    server_version_num: int | None = None,
) -> list[tuple[str, str]]:
    """START_REPLICATION parameters, `startup_params_format` first as the spec demands.

    `replication_sets` defaults to pglogical's `default` set. `binary` asks for
    send/recv values of built-in types; pglogical only grants it for the server's
    own major version, hence `server_version_num` (e.g. 150002) is then required.
    The internal (platform-dependent) format is always declined.
    """
    sets = ("default",) if replication_sets is None else tuple(replication_sets)
    if not sets:
        raise ConfigError(
            "no pglogical replication sets configured",
            hint="name at least one replication set (pglogical's own is 'default')",
        )
    if binary and (server_version_num is None or server_version_num < 90400):
        raise ConfigError(
            f"binary pglogical values need the server version, got {server_version_num!r}",
            hint="pass the server's server_version_num (e.g. 150002) or disable binary",
        )
    datum = struct.calcsize("P")
    options = [
        ("startup_params_format", "1"),
        ("min_proto_version", str(PROTO_VERSION_MIN)),
        ("max_proto_version", str(PROTO_VERSION_MAX)),
        ("proto_format", "native"),
        ("expected_encoding", _ENCODING),
        ("binary.want_internal_basetypes", "false"),
        ("binary.want_binary_basetypes", _bool(binary)),
    ]
    if binary and server_version_num is not None:
        options.append(("binary.basetypes_major_version", str(server_version_num // 100)))
    options += [
        ("binary.bigendian", _bool(sys.byteorder == "big")),
        ("binary.sizeof_int", str(struct.calcsize("i"))),
        ("binary.sizeof_long", str(struct.calcsize("l"))),
        ("binary.sizeof_datum", str(datum)),
        ("binary.float4_byval", "true"),
        ("binary.float8_byval", _bool(datum == 8)),
        ("binary.integer_datetimes", "true"),
        ("relmeta_cache_size", "-1"),
        ("pglogical.replication_set_names", ",".join(map(_quote_ident, sets))),
    ]
    if forward_origins:
        options.append(("pglogical.forward_origins", ",".join(map(_quote_ident, forward_origins))))
    return options


def _require(params: Mapping[str, str], key: str) -> str:
    value = params.get(key)
    if value is None:
        raise ProtocolError(
            "S", 0, f"startup message lacks {key!r}; is the slot's plugin pglogical_output?"
        )
    return value


def _int(params: Mapping[str, str], key: str) -> int:
    raw = _require(params, key)
    try:
        return int(raw)
    except ValueError:
        raise ProtocolError("S", 0, f"startup parameter {key}={raw!r} is not an integer") from None


def _norm_encoding(name: str) -> str:
    return name.upper().replace("-", "").replace("_", "")


def check_startup(startup: Startup, requested: Sequence[tuple[str, str]]) -> None:
    """Refuse a startup reply this client cannot decode, saying what to change."""
    params = startup.params
    asked = dict(requested)
    try:
        our_min = int(asked.get("min_proto_version", PROTO_VERSION_MIN))
        our_max = int(asked.get("max_proto_version", PROTO_VERSION_MAX))
    except ValueError:
        raise ConfigError(
            "requested pglogical protocol versions are not integers",
            hint="build the START_REPLICATION options with pglogical_options()",
        ) from None
    srv_min, srv_max = _int(params, "min_proto_version"), _int(params, "max_proto_version")
    if srv_min > our_max or srv_max < our_min:
        raise ProtocolError(
            "S",
            0,
            f"server speaks pglogical protocol {srv_min}..{srv_max}, the bridge "
            f"{our_min}..{our_max}; use a pglogical release with native protocol 1",
        )
    proto_format = params.get("proto_format", "native")
    if proto_format != "native":
        raise ProtocolError(
            "S", 0, f"server chose proto_format={proto_format!r}; request proto_format=native"
        )
    encoding = _require(params, "encoding")
    wanted = asked.get("expected_encoding", _ENCODING)
    if _norm_encoding(encoding) != _norm_encoding(wanted):
        raise ProtocolError(
            "S",
            0,
            f"server sends values in {encoding}, the bridge needs {wanted}; "
            "create the database with ENCODING 'UTF8'",
        )
    if startup_flag(params, "binary.internal_basetypes"):
        raise ProtocolError(
            "S",
            0,
            "server chose internal binary values, which are platform-dependent and "
            "not decodable here; send binary.want_internal_basetypes=false",
        )
    if startup_flag(params, "binary.binary_basetypes"):
        _check_binary(params, asked)


def _check_binary(params: Mapping[str, str], asked: Mapping[str, str]) -> None:
    if not startup_flag(asked, "binary.want_binary_basetypes"):
        raise ProtocolError(
            "S", 0, "server chose send/recv values that were not requested; upgrade pglogical"
        )
    version = params.get("binary.binary_pg_version") or _require(
        params, "binary.basetypes_major_version"
    )
    if version != asked.get("binary.basetypes_major_version"):
        raise ProtocolError(
            "S",
            0,
            f"server sends send/recv values of PostgreSQL {version}, requested "
            f"{asked.get('binary.basetypes_major_version')}; pass the server's "
            "version or disable binary",
        )
    # pglogical 2.4 reports integer_datetimes=f on PostgreSQL >= 10 (it tests a macro
    # that no longer exists); float datetimes cannot be built since 10, so only
    # older servers are believed.
    if not version.isdigit():
        raise ProtocolError("S", 0, f"binary PostgreSQL version {version!r} is not an integer")
    if int(version) < 1000 and not startup_flag(params, "binary.integer_datetimes"):
        raise ProtocolError(
            "S",
            0,
            "server uses floating-point datetimes, whose send/recv format the bridge "
            "does not decode; disable binary",
        )
