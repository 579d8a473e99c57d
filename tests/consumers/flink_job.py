"""A Flink SQL job, run by PyFlink's own interpreter (tests/consumers/flink.py), not pytest's.

It reads one bridge topic from its first offset to the offsets current at start
(`scan.bounded.mode = latest-offset`) with Flink's `debezium-avro-confluent` format,
as a changelog, and materialises it: every +I/-U/+U/-D row Flink emits for
`SELECT * FROM src` is applied to a dict keyed by the primary key. The result is
printed as one JSON document on stdout: {"rows": [...], "kinds": {...}}.

Its argument is one JSON object: bootstrap, registry (the Confluent-compatible URL),
topic, group, jars (file URLs), columns (Flink DDL column list) and key (column names).
Values are printed as str() of what PyFlink returns; the test converts PostgreSQL's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyflink.common import RowKind
from pyflink.table import EnvironmentSettings, TableEnvironment


def main(spec: dict[str, Any]) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join(spec["jars"]))
    config.set("parallelism.default", "1")
    config.set("table.exec.resource.default-parallelism", "1")
    options = {
        "connector": "kafka",
        "topic": spec["topic"],
        "properties.bootstrap.servers": spec["bootstrap"],
        "properties.group.id": spec["group"],
        "scan.startup.mode": "earliest-offset",
        "scan.bounded.mode": "latest-offset",
        "format": "debezium-avro-confluent",
        "debezium-avro-confluent.url": spec["registry"],
    }
    with_clause = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
    key = ", ".join(f"`{k}`" for k in spec["key"])
    env.execute_sql(
        f"CREATE TABLE src ({spec['columns']}, PRIMARY KEY ({key}) NOT ENFORCED) "
        f"WITH ({with_clause})"
    )
    table = env.from_path("src")
    names = table.get_schema().get_field_names()
    at = [names.index(k) for k in spec["key"]]
    rows: dict[str, list[Any]] = {}
    kinds: dict[str, int] = {}
    with table.execute().collect() as results:
        for row in results:
            kind = row.get_row_kind()
            values = [None if v is None else str(v) for v in row]
            ident = json.dumps([values[i] for i in at])
            kinds[kind.name] = kinds.get(kind.name, 0) + 1
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                rows[ident] = values
            else:
                rows.pop(ident, None)
    print(json.dumps({"columns": names, "rows": list(rows.values()), "kinds": kinds}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
