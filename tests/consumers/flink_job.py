"""A Flink SQL job, run by PyFlink's own interpreter (tests/consumers/flink.py), not pytest's.

It reads one bridge topic from its first offset to the offsets current at start
(`scan.bounded.mode = latest-offset`) with Flink's `debezium-avro-confluent` format,
as a changelog, and materialises it: every +I/-U/+U/-D row Flink emits for
`SELECT * FROM src` is applied to a dict keyed by the primary key. The result,
{"columns": [...], "rows": [...], "kinds": {...}}, is pickled into the file `out`, so
the values keep the Python types PyFlink returns (Decimal, date, datetime, bytes; ROW as
dict, ARRAY as list, MAP as dict) for the test to compare with psycopg's. Both ends are
this repository's own code on one machine.

Its argument is one JSON object: bootstrap, registry (the Confluent-compatible URL),
topic, group, jars (file URLs), columns (Flink DDL column list), key (column names),
out (the result's path); optionally json and text (columns read as JSON_STRING or as
text, see below).
"""

from __future__ import annotations

import json
import pickle
import sys
from typing import Any

from pyflink.common import Row, RowKind
from pyflink.table import EnvironmentSettings, TableEnvironment


def plain(value: Any) -> Any:
    """PyFlink's value with its Row types as dicts (picklable without PyFlink)."""
    if isinstance(value, Row):
        return {k: plain(v) for k, v in value.as_dict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, bytearray):
        return bytes(value)
    return value


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
    names = env.from_path("src").get_schema().get_field_names()
    # PyFlink's collect() fails (EOFError) on an ARRAY or MAP holding a NULL: those
    # columns are read as Flink's JSON_STRING of them, cast first where JSON_STRING
    # takes no such elements (DATE): {column: the cast's type or None}.
    # Floats are read as text: PyFlink's collect() fails on NaN (ast.literal_eval).
    json_columns: dict[str, str | None] = spec.get("json", {})
    text_columns = set(spec.get("text", ()))

    def column(n: str) -> str:
        if n in text_columns:
            return f"CAST(`{n}` AS STRING) AS `{n}`"
        if n not in json_columns:
            return f"`{n}`"
        cast = json_columns[n]
        value = f"CAST(`{n}` AS {cast})" if cast else f"`{n}`"
        return f"JSON_STRING({value}) AS `{n}`"

    select = ", ".join(column(n) for n in names)
    table = env.sql_query(f"SELECT {select} FROM src")
    at = [names.index(k) for k in spec["key"]]
    rows: dict[str, list[Any]] = {}
    kinds: dict[str, int] = {}
    with table.execute().collect() as results:
        for row in results:
            kind = row.get_row_kind()
            values = [plain(v) for v in row]
            ident = repr([values[i] for i in at])
            kinds[kind.name] = kinds.get(kind.name, 0) + 1
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                rows[ident] = values
            else:
                rows.pop(ident, None)
    result = {"columns": names, "rows": list(rows.values()), "kinds": kinds}
    with open(spec["out"], "wb") as out:
        pickle.dump(result, out)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
