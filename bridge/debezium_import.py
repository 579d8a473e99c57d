"""`bridge import-debezium`: a Debezium PostgreSQL connector configuration → our YAML.

For users moving a running connector over (docs/debezium.md): every property
is either mapped to a setting of `bridge.config`, or listed with what to do instead. The
result is validated by `Config` before it is written, so what this prints always loads.

Choices where Debezium and the bridge differ by default:
- `avro.timestamptz_mode: iso` always: Debezium writes timestamptz as an ISO-8601 string
  (io.debezium.time.ZonedTimestamp); our default (a long) would not register as a
  compatible version of its subjects.
- `filters.skipped_operations: [t]` when `skipped.operations` is absent: Debezium skips
  TRUNCATE events unless told otherwise.
- `avro.numeric_mode: variable` when `decimal.handling.mode` is absent: Debezium's
  `precise` writes numeric without a typmod as a {scale, value} record, as ours does.
- Secrets (database password, registry credentials) are never copied into the file: the
  output names the `BRIDGE_…` environment variable that takes each.
- `snapshot.mode` keeps its meaning: on an existing slot `initial` does not snapshot again,
  so a take-over streams from the slot's confirmed_flush_lsn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NamedTuple

import yaml
from pydantic import ValidationError

from bridge.config import Config, describe_errors
from bridge.errors import ConfigError

CONNECTOR_CLASS: Final = "io.debezium.connector.postgresql.PostgresConnector"
_CCOMPAT: Final = "/apis/ccompat/v7"
_DEFAULT_PUBLICATION: Final = "dbz_publication"
_DEFAULT_SLOT: Final = "debezium"


class Imported(NamedTuple):
    """What the import produced: nested settings, and one line per property."""

    settings: dict[str, Any]
    mapped: list[str]  # "property -> section.key"
    unsupported: list[str]  # "property: what to do"


class _Import:
    """Collects settings and notes while the properties are walked."""

    def __init__(self) -> None:
        self.settings: dict[str, dict[str, Any]] = {}
        self.mapped: list[str] = []
        self.unsupported: list[str] = []

    def set(self, prop: str, path: str, value: Any) -> None:
        section, key = path.split(".", 1)
        self.settings.setdefault(section, {})[key] = value
        self.mapped.append(f"{prop} -> {path}")

    def env(self, prop: str, variable: str) -> None:
        self.mapped.append(f"{prop} -> environment {variable} (secrets stay out of the file)")

    def unsupported_(self, prop: str, what: str) -> None:
        self.unsupported.append(f"{prop}: {what}")


Handler = Callable[[_Import, str, str, dict[str, str]], None]


def _to(path: str, convert: Callable[[str], Any] = str) -> Handler:
    def handle(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
        imp.set(prop, path, convert(value))

    return handle


def _bool(value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"not a boolean: {value!r}", hint="use true or false")
    return value.strip().lower() == "true"


def _regexes(value: str) -> tuple[str, ...]:
    """Debezium's comma-separated regular expression lists (a full match, as ours)."""
    return tuple(p.strip() for p in value.split(",") if p.strip())


def _seconds(value: str) -> float:
    return int(value) / 1000


def _secret(variable: str) -> Handler:
    def handle(imp: _Import, prop: str, _value: str, _props: dict[str, str]) -> None:
        imp.env(prop, variable)

    return handle


def _ignored(why: str) -> Handler:
    def handle(imp: _Import, prop: str, _value: str, _props: dict[str, str]) -> None:
        imp.mapped.append(f"{prop} -> (not needed: {why})")

    return handle


def _unsupported(what: str) -> Handler:
    def handle(imp: _Import, prop: str, _value: str, _props: dict[str, str]) -> None:
        imp.unsupported_(prop, what)

    return handle


def _connector_class(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    if value != CONNECTOR_CLASS:
        raise ConfigError(
            f"{prop} is {value!r}, not Debezium's PostgreSQL connector",
            hint=f"import the configuration of a {CONNECTOR_CLASS}",
        )
    imp.mapped.append(f"{prop} -> (checked)")


def _plugin(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    if value != "pgoutput":
        imp.unsupported_(
            prop,
            f"{value} is not supported (pgoutput and pglogical_output are): the slot cannot be "
            "taken over; create a pgoutput slot and start with snapshot.mode initial",
        )
        return
    imp.set(prop, "source.plugin", value)


_AUTOCREATE: Final = {"all_tables": "all_tables", "filtered": "filtered", "disabled": "disabled"}


def _autocreate(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    if value == "no_tables":
        imp.set(prop, "source.publication_mode", "disabled")
        imp.unsupported_(prop, "no_tables: the bridge uses the publication as it is (disabled)")
        return
    if value not in _AUTOCREATE:
        raise ConfigError(f"{prop}: unknown value {value!r}", hint="all_tables, filtered, disabled")
    imp.set(prop, "source.publication_mode", _AUTOCREATE[value])


_SNAPSHOT_MODES: Final = {
    "initial": "initial",
    "initial_only": "initial_only",
    "no_data": "no_data",
    "never": "no_data",  # Debezium 1.x/2.x name
    "schema_only": "no_data",  # its former name
    "when_needed": "when_needed",
    "always": "always",
}


def _snapshot_mode(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    mode = _SNAPSHOT_MODES.get(value)
    if mode is None:
        imp.unsupported_(
            prop,
            f"{value} has no equivalent; choose initial, initial_only, no_data, when_needed "
            "or always (snapshot.mode)",
        )
        return
    imp.set(prop, "snapshot.mode", mode)


def _skipped(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    ops = [op.strip() for op in value.split(",") if op.strip()]
    if ops == ["none"]:
        ops = []
    bad = [op for op in ops if op not in ("c", "u", "d", "t")]
    if bad:
        imp.unsupported_(prop, f"operations {bad} are not skipped (only c, u, d, t can be)")
    imp.set(prop, "filters.skipped_operations", [op for op in ops if op not in bad])


def _retries(imp: _Import, prop: str, _value: str, props: dict[str, str]) -> None:
    """slot.max.retries x slot.retry.delay.ms: how long a busy slot is waited for."""
    retries = int(props.get("slot.max.retries", "6"))
    delay = int(props.get("slot.retry.delay.ms", "10000"))
    imp.settings.setdefault("source", {})["slot_busy_timeout_s"] = retries * delay / 1000
    imp.mapped.append(f"{prop} -> source.slot_busy_timeout_s (retries x delay)")


def _decimal(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    modes = {"precise": "variable", "double": "double", "string": "string"}
    if value not in modes:
        raise ConfigError(f"{prop}: unknown value {value!r}", hint="precise, double or string")
    imp.set(prop, "avro.numeric_mode", modes[value])
    if value != "precise":
        imp.unsupported_(
            prop,
            f"{value} applies to numeric without precision only (avro.numeric_mode); "
            "numeric(p,s) stays an Avro decimal",
        )


def _choice(path: str, modes: dict[str, str]) -> Handler:
    """A Debezium mode property whose values map one to one onto one of our settings."""

    def handle(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
        if value not in modes:
            imp.unsupported_(prop, f"{value}: not offered (the bridge has {', '.join(modes)})")
        else:
            imp.set(prop, path, modes[value])

    return handle


# Debezium's defaults of the mode properties above, where ours differ: an absent property
# means what it meant to Debezium, so the value schemas stay versions of its subjects.
_MODE_DEFAULTS: dict[str, tuple[str, str]] = {
    "time.precision.mode": ("time_precision_mode", "adaptive"),
    "interval.handling.mode": ("interval_mode", "numeric"),
    "hstore.handling.mode": ("hstore_mode", "json"),
}


def _default_only(default: str, what: str) -> Handler:
    """A property whose Debezium default is what the bridge does; other values differ."""

    def handle(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
        if value == default:
            imp.mapped.append(f"{prop} -> (the bridge's behaviour)")
        else:
            imp.unsupported_(prop, f"{value}: {what}")

    return handle


def _schema_filters(imp: _Import, prop: str, value: str, props: dict[str, str]) -> None:
    """schema.include/exclude.list as table patterns `schema\\..*`, folded into the table
    lists (an include list of both kinds: tables of those schemas, by a lookahead)."""
    schemas = "|".join(_regexes(value))
    if prop == "schema.exclude.list":
        imp.settings.setdefault("filters", {}).setdefault("exclude_tables", [])
        imp.settings["filters"]["exclude_tables"].append(rf"(?:{schemas})\..*")
        imp.mapped.append(f"{prop} -> filters.exclude_tables")
        return
    tables = props.get("table.include.list")
    if tables:
        return  # folded in by _table_include
    imp.set(prop, "filters.include_tables", [rf"(?:{schemas})\..*"])


def _table_include(imp: _Import, prop: str, value: str, props: dict[str, str]) -> None:
    schemas = props.get("schema.include.list")
    patterns = list(_regexes(value))
    if schemas:
        ahead = "|".join(_regexes(schemas))
        patterns = [rf"(?=(?:{ahead})\.){p}" for p in patterns]
        imp.mapped.append("schema.include.list -> filters.include_tables (with the tables)")
    imp.set(prop, "filters.include_tables", patterns)


def _table_exclude(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    imp.settings.setdefault("filters", {}).setdefault("exclude_tables", [])
    imp.settings["filters"]["exclude_tables"].extend(_regexes(value))
    imp.mapped.append(f"{prop} -> filters.exclude_tables")


def _column_include(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    kept = "|".join(_regexes(value))
    imp.settings.setdefault("filters", {}).setdefault("exclude_columns", [])
    imp.settings["filters"]["exclude_columns"].append(rf"(?!(?:{kept})$).*")
    imp.mapped.append(f"{prop} -> filters.exclude_columns (every column not listed)")


def _column_exclude(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    imp.settings.setdefault("filters", {}).setdefault("exclude_columns", [])
    imp.settings["filters"]["exclude_columns"].extend(_regexes(value))
    imp.mapped.append(f"{prop} -> filters.exclude_columns")


def _snapshot_tables(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    names = _regexes(value)
    if any(re.search(r"[\\^$.*+?()\[\]{}|]", n.replace(".", "", 1)) for n in names):
        imp.unsupported_(
            prop, "regular expressions: list the tables by name in snapshot.tables instead"
        )
        return
    imp.set(prop, "snapshot.tables", list(names))


_STRATEGIES: Final = {
    "TopicNameStrategy": "topic",
    "RecordNameStrategy": "record",
    "TopicRecordNameStrategy": "topic_record",
    "TopicIdStrategy": "topic",
    "RecordIdStrategy": "record",
    "TopicRecordIdStrategy": "topic_record",
}


def _subject_strategy(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    strategy = _STRATEGIES.get(value.rsplit(".", 1)[-1])
    if strategy is None:
        imp.unsupported_(prop, f"{value}: use avro.subject_strategy topic, record or topic_record")
        return
    imp.set(prop, "avro.subject_strategy", strategy)


def _converter(imp: _Import, prop: str, value: str, props: dict[str, str]) -> None:
    side = prop.split(".", 1)[0]
    name = value.rsplit(".", 1)[-1]
    if name != "AvroConverter":
        imp.unsupported_(
            prop,
            f"{value}: the bridge writes Avro (Confluent wire format) only; consumers of "
            f"these topics must switch to an Avro deserializer",
        )
        return
    if (
        value.startswith("io.apicurio.")
        and props.get(f"{side}.converter.apicurio.registry.as-confluent", "false") != "true"
    ):
        imp.unsupported_(
            prop,
            "Apicurio's converter without as-confluent=true writes ids in headers (or 8-byte "
            "ids); the bridge writes the Confluent framing: consumers must read that",
        )
    imp.mapped.append(f"{prop} -> (Avro: the bridge's format)")


def _registry_url(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    url = value.split(",", maxsplit=1)[0].strip()
    if prop.endswith("apicurio.registry.url"):
        url = url.split("/apis/", 1)[0] + _CCOMPAT  # Apicurio's Confluent-compatible API
    if imp.settings.get("registry", {}).get("url") not in (None, url):
        imp.unsupported_(prop, "key and value converters use different registries; one is kept")
        return
    imp.set(prop, "registry.url", url)


def _basic_auth(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    if "${" in value:  # a config provider: the user name is not known either
        imp.env(prop, "BRIDGE_REGISTRY__BASIC_AUTH_USER and BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD")
        return
    imp.set(prop, "registry.basic_auth_user", value.split(":", 1)[0])
    imp.env(prop, "BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD")


def _key_columns(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    """`<table regex>:<col>,<col>;<table regex>:<col>` as avro.key_columns."""
    keys: dict[str, list[str]] = {}
    for entry in value.split(";"):
        table, sep, columns = entry.strip().rpartition(":")
        names = [c.strip() for c in columns.split(",") if c.strip()]
        if not sep or not table or not names:
            imp.unsupported_(prop, f"{entry.strip()!r} is not <table regex>:<column>,...")
            continue
        keys[table] = names
    if keys:
        imp.set(prop, "avro.key_columns", keys)


_MASK: Final = re.compile(r"column\.mask\.with\.(\d+)\.chars")
_TRUNCATE: Final = re.compile(r"column\.truncate\.to\.(\d+)\.chars")
_HASH: Final = re.compile(r"column\.mask\.hash\.(v2\.)?([^.]+(?:\.[^.]+)*?)\.with\.salt\.(.*)")


def _column_rule(imp: _Import, prop: str, value: str, _props: dict[str, str]) -> None:
    """column.mask.with.N.chars, column.truncate.to.N.chars and
    column.mask.hash[.v2].<algorithm>.with.salt.<salt> as avro.column_rules, one per regex."""
    rule: dict[str, Any]
    if m := _MASK.fullmatch(prop):
        rule = {"action": "mask", "length": int(m.group(1))}
    elif m := _TRUNCATE.fullmatch(prop):
        rule = {"action": "truncate", "length": int(m.group(1))}
    elif m := _HASH.fullmatch(prop):
        rule = {"action": "hash", "algorithm": m.group(2), "salt": m.group(3)}
        if m.group(1) is None:
            imp.unsupported_(
                prop,
                "hashed like Debezium's v2 strategy (salt + the value's UTF-8 bytes), not its "
                "default v1 (a serialised Java string): hashes differ from those already in "
                "the topics",
            )
    else:
        imp.unsupported_(prop, "not recognised: no bridge setting does this")
        return
    rules = imp.settings.setdefault("avro", {}).setdefault("column_rules", [])
    rules += [{"match": pattern, **rule} for pattern in _regexes(value)]
    imp.mapped.append(f"{prop} -> avro.column_rules")


_OVERRIDES: Final = "snapshot.select.statement.overrides"


def _select_overrides(imp: _Import, prop: str, value: str, props: dict[str, str]) -> None:
    """The table list `snapshot.select.statement.overrides` and one
    `snapshot.select.statement.overrides.<schema>.<table>` SELECT per listed table, as
    snapshot.select_overrides (read at the list; a statement for an unlisted table is
    ignored by Debezium, and listed here)."""
    if prop != _OVERRIDES:
        table = prop[len(_OVERRIDES) + 1 :]
        if table in _regexes(props.get(_OVERRIDES, "")):
            imp.mapped.append(f"{prop} -> snapshot.select_overrides")
        else:
            imp.unsupported_(prop, f"{table} is not in {_OVERRIDES}: Debezium ignores it too")
        return
    overrides: dict[str, str] = {}
    for table in _regexes(value):
        statement = props.get(f"{prop}.{table}")
        if statement is None:
            imp.unsupported_(prop, f"no {prop}.{table} statement: {table} is read whole")
        else:
            overrides[table] = statement
    if overrides:
        imp.set(prop, "snapshot.select_overrides", overrides)


def _signal_channel(imp: _Import, prop: str, value: str, props: dict[str, str]) -> None:
    """Debezium's Kafka signal channel as snapshot.signal_kafka_topic; the source channel
    is snapshot.signal_table (signal.data.collection), always on when set."""
    if prop == "signal.enabled.channels":
        other = [c for c in _regexes(value) if c not in ("source", "kafka")]
        if other:
            imp.unsupported_(prop, f"channels {other}: only source and kafka exist here")
        if "kafka" in _regexes(value) and "signal.kafka.topic" not in props:
            imp.unsupported_(prop, "kafka without signal.kafka.topic: set it")
        imp.mapped.append(f"{prop} -> (signal_table / signal_kafka_topic when set)")
    elif prop == "signal.kafka.topic":
        if "kafka" in _regexes(props.get("signal.enabled.channels", "source")):
            imp.set(prop, "snapshot.signal_kafka_topic", value)
        else:
            imp.mapped.append(f"{prop} -> (not used: signal.enabled.channels lacks kafka)")
    elif prop == "signal.kafka.groupId":
        imp.set(prop, "snapshot.signal_kafka_group", value)
    elif prop == "signal.kafka.poll.timeout.ms":
        imp.mapped.append(f"{prop} -> (not needed: the topic is read without waiting)")
    elif prop == "signal.kafka.bootstrap.servers":
        imp.mapped.append(f"{prop} -> (the signal topic is read from kafka.bootstrap_servers)")
    else:
        imp.unsupported_(prop, "not supported: the signal consumer uses the kafka.* settings")


def _notification_channel(imp: _Import, prop: str, value: str, props: dict[str, str]) -> None:
    """Debezium's sink notification channel as snapshot.notification_topic; its log channel
    is the bridge's log, its JMX one the metrics endpoint."""
    channels = _regexes(props.get("notification.enabled.channels", ""))
    if prop == "notification.enabled.channels":
        other = [c for c in channels if c not in ("sink", "log", "jmx")]
        if other:
            imp.unsupported_(prop, f"channels {other}: only sink, log and jmx exist here")
        if "sink" in channels and "notification.sink.topic.name" not in props:
            imp.unsupported_(prop, "sink without notification.sink.topic.name: set it")
        imp.mapped.append(
            f"{prop} -> (sink: notification_topic; log: the bridge's log; jmx: the metrics "
            "endpoint's snapshot progress)"
        )
    elif prop == "notification.sink.topic.name":
        if "sink" in channels:
            imp.set(prop, "snapshot.notification_topic", value)
        else:
            imp.mapped.append(f"{prop} -> (not used: notification.enabled.channels lacks sink)")
    else:
        imp.unsupported_(prop, "not supported: notifications use the kafka.* settings")


EVENT_ROUTER: Final = "io.debezium.transforms.outbox.EventRouter"
_SMT: Final = (
    "single message transforms do not run in the bridge: apply them in the consumer "
    "(ExtractNewRecordState: read `after`), or route with kafka.topic_template"
)
# EventRouter properties -> outbox settings (the values as they are)
_ROUTER_FIELDS: Final = {
    "table.field.event.id": "id_column",
    "table.field.event.key": "key_column",
    "table.field.event.payload": "payload_column",
    "route.by.field": "route_by_column",
    "route.topic.regex": "topic_regex",
    "route.topic.replacement": "topic_replacement",
    "table.op.invalid.behavior": "on_update",
}
_ROUTER_UNSUPPORTED: Final = {
    "table.field.event.timestamp": "record timestamps are the time the bridge produced them "
    "(Debezium's default); a column's time is not used",
    "table.field.event.schema.version": "the value schema is the payload column's alone",
    "predicate": "set outbox.tables to the outbox tables' schema.table regexes "
    "(without a predicate every captured table is routed, as here)",
    "negate": "set outbox.tables to the outbox tables' schema.table regexes",
}


def _routers(props: dict[str, str]) -> list[str]:
    names = _regexes(props.get("transforms", ""))
    return [n for n in names if props.get(f"transforms.{n}.type") == EVENT_ROUTER]


def _transforms(imp: _Import, prop: str, value: str, props: dict[str, str]) -> None:
    """Debezium's outbox EventRouter as outbox.* (the first one); every other transform
    listed: it does not run in the bridge."""
    routers = _routers(props)
    if prop == "transforms":
        others = [n for n in _regexes(value) if n not in routers[:1]]
        if others:
            imp.unsupported_(prop, f"{', '.join(others)}: {_SMT}")
        if routers:
            imp.settings.setdefault("outbox", {})["tables"] = [".*"]
            imp.mapped.append(f"{prop} -> outbox.tables (every captured table, as Debezium)")
        return
    name, _, key = prop[len("transforms.") :].partition(".")
    if name not in routers[:1]:
        imp.unsupported_(prop, _SMT if name not in routers else "one outbox router only")
        return
    _router_property(imp, prop, key, value)


def _router_property(imp: _Import, prop: str, key: str, value: str) -> None:
    outbox = imp.settings.setdefault("outbox", {})
    if key == "type":
        imp.mapped.append(f"{prop} -> outbox (Debezium's outbox event router)")
    elif key in _ROUTER_FIELDS:
        imp.set(prop, f"outbox.{_ROUTER_FIELDS[key]}", value)
    elif key == "route.tombstone.on.empty.payload":
        imp.set(prop, "outbox.tombstone_on_empty_payload", _bool(value))
    elif key == "table.expand.json.payload" and not _bool(value):
        imp.mapped.append(f"{prop} -> (the bridge's behaviour: the payload as it is)")
    elif key == "table.fields.additional.placement":
        headers = {}
        for entry in _regexes(value):
            parts = [p.strip() for p in entry.split(":")]
            if len(parts) in (2, 3) and parts[1] == "header":
                headers[parts[0]] = parts[2] if len(parts) == 3 else parts[0]
            else:
                imp.unsupported_(prop, f"{entry}: only header placement is supported")
        outbox["headers"] = headers
        imp.mapped.append(f"{prop} -> outbox.headers")
    elif key == "table.field.event.type":
        imp.mapped.append(f"{prop} -> (not needed: a column is a header by outbox.headers)")
    else:
        imp.unsupported_(prop, _ROUTER_UNSUPPORTED.get(key, "not supported by outbox.*"))


_GROUP_KEYS: Final = ("include", "exclude", "partitions", "replication.factor")


def _topic_group(props: dict[str, str], group: str) -> dict[str, Any]:
    """One `topic.creation.<group>.*` family as a `kafka.topic_creation` rule."""
    prefix = f"topic.creation.{group}."
    own = {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}
    rule: dict[str, Any] = {}
    include = "|".join(_regexes(own.get("include", ".*")))
    exclude = "|".join(_regexes(own.get("exclude", "")))
    rule["match"] = (rf"(?!(?:{exclude})$)" if exclude else "") + f"(?:{include})"
    if "partitions" in own:
        rule["partitions"] = int(own["partitions"])
    if "replication.factor" in own:
        rule["replication_factor"] = int(own["replication.factor"])
    config = {k: v for k, v in own.items() if k not in _GROUP_KEYS}
    if config:
        rule["config"] = config
    return rule


def _topic_creation(imp: _Import, prop: str, _value: str, props: dict[str, str]) -> None:
    """All of `topic.creation.*` at its first property: the groups in their order, then
    the default group for every other topic (Debezium's precedence)."""
    kafka = imp.settings.setdefault("kafka", {})
    if "topic_creation" not in kafka:
        groups = list(_regexes(props.get("topic.creation.groups", "")))
        rules = [_topic_group(props, group) for group in groups]
        if any(k.startswith("topic.creation.default.") for k in props):
            rules.append(_topic_group(props, "default"))
        kafka["topic_creation"] = rules
    if prop == "topic.creation.enable":
        imp.mapped.append(f"{prop} -> (rules apply when kafka.topic_creation has any)")
        return
    imp.mapped.append(f"{prop} -> kafka.topic_creation")


# Settings that hold for the run: one property -> one handler.
_HANDLERS: Final[dict[str, Handler]] = {
    "connector.class": _connector_class,
    "name": _ignored("the connector's name in Kafka Connect"),
    "tasks.max": _ignored("one task, always"),
    "database.hostname": _to("source.host"),
    "database.port": _to("source.port", int),
    "database.user": _to("source.user"),
    "database.password": _secret("BRIDGE_SOURCE__PASSWORD"),
    "database.dbname": _to("source.dbname"),
    "database.sslmode": _to("source.sslmode"),
    "database.sslrootcert": _to("source.sslrootcert"),
    "database.tcpKeepAlive": _ignored("source.tcp_user_timeout_s detects a dead link"),
    "topic.prefix": _to("kafka.topic_prefix"),
    "database.server.name": _to("kafka.topic_prefix"),  # Debezium 1.x
    "plugin.name": _plugin,
    "slot.name": _to("source.slot_name"),
    "publication.name": _to("source.publication_name"),
    "publication.autocreate.mode": _autocreate,
    "slot.failover": _to("source.failover_slot", _bool),
    "slot.max.retries": _retries,
    "slot.retry.delay.ms": _retries,
    "status.update.interval.ms": _to("source.status_interval_s", _seconds),
    "slot.drop.on.stop": _unsupported(
        "the bridge never drops its slot; drop it with pg_drop_replication_slot when done"
    ),
    "slot.stream.params": _unsupported("set the source.* plugin options instead"),
    "snapshot.mode": _snapshot_mode,
    "snapshot.include.collection.list": _snapshot_tables,
    "snapshot.max.threads": _to("snapshot.workers", int),
    "snapshot.fetch.size": _ignored("the snapshot reads chunks of snapshot.chunk_size rows"),
    "snapshot.lock.timeout.ms": _ignored("the snapshot takes no table locks"),
    "snapshot.locking.mode": _ignored("the snapshot takes no table locks"),
    "snapshot.isolation.mode": _ignored("snapshots read the slot's exported snapshot"),
    "incremental.snapshot.chunk.size": _to("snapshot.incremental_chunk_size", int),
    "signal.data.collection": _to("snapshot.signal_table"),
    "read.only": _to("snapshot.read_only", _bool),
    "schema.include.list": _schema_filters,
    "schema.exclude.list": _schema_filters,
    "table.include.list": _table_include,
    "table.exclude.list": _table_exclude,
    "column.include.list": _column_include,
    "column.exclude.list": _column_exclude,
    "skipped.operations": _skipped,
    "tombstones.on.delete": _to("pipeline.tombstones", _bool),
    "heartbeat.interval.ms": _to("pipeline.heartbeat_interval_s", _seconds),
    "heartbeat.action.query": _unsupported(
        "the bridge's heartbeat writes a logical decoding message itself; drop the query"
    ),
    "provide.transaction.metadata": _to("pipeline.transaction_metadata", _bool),
    "max.queue.size": _to("pipeline.max_in_flight_records", int),
    "max.batch.size": _ignored("records are produced as they are decoded"),
    "poll.interval.ms": _ignored("records are produced as they are decoded"),
    "decimal.handling.mode": _decimal,
    "time.precision.mode": _choice(
        "avro.time_precision_mode",
        {"adaptive": "adaptive", "adaptive_time_microseconds": "micros", "connect": "connect"},
    ),
    "interval.handling.mode": _choice(
        "avro.interval_mode", {"numeric": "numeric", "string": "string"}
    ),
    "binary.handling.mode": _choice(
        "avro.binary_mode", {"bytes": "bytes", "base64": "base64", "hex": "hex"}
    ),
    "hstore.handling.mode": _choice("avro.hstore_mode", {"map": "map", "json": "json"}),
    "include.unknown.datatypes": _ignored("every type is written, unknown ones as text"),
    "datatype.propagate.source.type": _ignored("every field carries pg.type"),
    "schema.name.adjustment.mode": _default_only("avro", "names are adjusted as Avro needs"),
    "field.name.adjustment.mode": _default_only("avro", "names are adjusted as Avro needs"),
    "flush.lsn.source": _default_only(
        "true", "the bridge always confirms delivered LSNs to the slot"
    ),
    "event.processing.failure.handling.mode": _choice(
        "pipeline.on_error", {"fail": "fail", "warn": "skip", "skip": "skip"}
    ),
    "key.converter": _converter,
    "value.converter": _converter,
    "key.converter.schema.registry.url": _registry_url,
    "value.converter.schema.registry.url": _registry_url,
    "key.converter.apicurio.registry.url": _registry_url,
    "value.converter.apicurio.registry.url": _registry_url,
    "key.converter.basic.auth.user.info": _basic_auth,
    "value.converter.basic.auth.user.info": _basic_auth,
    "key.converter.key.subject.name.strategy": _subject_strategy,
    "value.converter.value.subject.name.strategy": _subject_strategy,
    "key.converter.apicurio.registry.artifact-resolver-strategy": _subject_strategy,
    "value.converter.apicurio.registry.artifact-resolver-strategy": _subject_strategy,
}

# Families of properties, by prefix: (prefix, handler).
_PREFIXES: Final[tuple[tuple[str, Handler], ...]] = (
    ("transforms", _transforms),
    (
        "message.key.columns",
        _key_columns,
    ),
    ("column.mask.", _column_rule),
    ("column.truncate.", _column_rule),
    ("column.propagate.source.type", _ignored("every field carries pg.type")),
    (
        "topic.creation.",
        _topic_creation,
    ),
    ("key.converter.", _ignored("converter setting with no bridge equivalent")),
    ("value.converter.", _ignored("converter setting with no bridge equivalent")),
    ("producer.override.", _unsupported("set the librdkafka setting in kafka.producer")),
    ("errors.", _ignored("Kafka Connect's error handling; the bridge stops on errors")),
    ("database.initial.statements", _unsupported("run them as the role's default settings")),
    ("snapshot.select.statement.overrides", _select_overrides),
    ("notification.", _notification_channel),
    ("signal.", _signal_channel),
    ("converters", _unsupported("custom converters do not run in the bridge")),
)

# `${provider:[path:]key}`; not a regex router's `${routedByValue}`
_PROVIDER: Final = re.compile(r"\$\{[^}:]+:[^}]*\}")
_SECRET_PROPS: Final = re.compile(r"password|secret|user\.info|sasl\.jaas", re.IGNORECASE)


def import_connector(props: dict[str, str], bootstrap_servers: str | None = None) -> Imported:
    """Map a connector's properties; raise ConfigError when the result is not valid.

    `bootstrap_servers` is the Connect worker's (a connector configuration lacks it)."""
    imp = _Import()
    if bootstrap_servers is not None:
        imp.set("(worker) bootstrap.servers", "kafka.bootstrap_servers", bootstrap_servers)
    if props.get("connector.class") is None:
        raise ConfigError(
            "no connector.class in the connector configuration",
            hint=f"import the configuration of a {CONNECTOR_CLASS}",
        )
    for prop in sorted(props):
        value = props[prop]
        handler = _HANDLERS.get(prop) or next(
            (h for prefix, h in _PREFIXES if prop.startswith(prefix)), None
        )
        if handler is None:
            imp.unsupported_(prop, "not recognised: no bridge setting does this")
            continue
        if _PROVIDER.search(value) and not _SECRET_PROPS.search(prop):
            imp.unsupported_(prop, f"{value} is a Connect config provider: resolve it by hand")
            continue
        handler(imp, prop, value, props)
    _defaults(imp, props)
    settings = {section: dict(values) for section, values in sorted(imp.settings.items())}
    try:
        Config.model_validate(settings)  # the file alone, no BRIDGE_* environment
    except ValidationError as exc:
        raise ConfigError(
            "the imported settings are not valid: "
            + "; ".join(line.strip() for line in describe_errors(exc)),
            hint="fix the connector property behind each field named, then import again",
        ) from None
    return Imported(settings, imp.mapped, imp.unsupported)


def _defaults(imp: _Import, props: dict[str, str]) -> None:
    """Debezium's defaults where ours differ, so an absent property means what it meant."""
    source = imp.settings.setdefault("source", {})
    source.setdefault("slot_name", _DEFAULT_SLOT)
    source.setdefault("publication_name", _DEFAULT_PUBLICATION)
    source.setdefault("plugin", "pgoutput")  # Debezium 2.x+ default (1.x: decoderbufs)
    imp.settings.setdefault("avro", {})["timestamptz_mode"] = "iso"
    if "decimal.handling.mode" not in props:  # Debezium's default: precise
        imp.settings["avro"]["numeric_mode"] = "variable"
    for prop, (setting, value) in _MODE_DEFAULTS.items():
        if prop not in props:
            imp.settings["avro"][setting] = value
    if "skipped.operations" not in props:
        imp.settings.setdefault("filters", {})["skipped_operations"] = ["t"]
    if "bootstrap_servers" not in imp.settings.get("kafka", {}):
        imp.unsupported.append(
            "(worker) bootstrap.servers: not in a connector configuration; set "
            "kafka.bootstrap_servers (or import with --bootstrap-servers)"
        )


def read_connector_file(path: Path) -> dict[str, str]:
    """A connector's properties from `.json` (Connect REST: {"name", "config"} or the bare
    config object) or `.properties` (Java properties syntax)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}",
            hint="pass the connector's .json or .properties file",
        ) from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON: {exc}", hint="fix the JSON") from None
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            data = {**data["config"], **({"name": data["name"]} if "name" in data else {})}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: not a JSON object", hint="give the connector's config")
        return {str(k): _text(v) for k, v in data.items()}
    return parse_properties(text)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties`: `#`/`!` comments, `=`, `:` or space separators, backslash line
    continuations and escapes."""
    props: dict[str, str] = {}
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1] + next(lines, "").lstrip()
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        assert match is not None  # every line matches: both groups may be empty
        props[_unescape(match.group(1))] = _unescape(match.group(2))
    return props


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes continues the line."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(text: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}

    def one(match: re.Match[str]) -> str:
        char = match.group(1)
        if char.startswith("u"):
            return chr(int(char[1:], 16))
        return escapes.get(char, char)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def render(imported: Imported, source: str) -> str:
    """The YAML file: what needs doing first as comments, then the settings."""
    head = [f"# Imported from Debezium connector configuration {source} by bridge import-debezium."]
    if imported.unsupported:
        head.append("# Not carried over (what to do instead):")
        head += [f"#   {line}" for line in imported.unsupported]
    head.append("# Mapped:")
    head += [f"#   {line}" for line in imported.mapped]
    body = yaml.safe_dump(imported.settings, sort_keys=False, default_flow_style=False)
    return "\n".join(head) + "\n" + body
