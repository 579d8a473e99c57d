"""Debezium's PostgreSQL connector writing Avro into the local stack, for the take-over tests.

The Connect worker is bench/compare_debezium.py's (jars from Maven Central, cached per
machine); here it gets Apicurio's Avro converter (Confluent wire format, subjects
`<topic>-key` / `<topic>-value`) so the registry holds Debezium's own subjects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_module import load_bench_module

dbz: Any = load_bench_module("compare_debezium")


def avro_debezium(
    stack: Any,
    *,
    dbname: str,
    slot: str,
    publication: str,
    prefix: str,
    tables: list[str],
    workdir: Path,
) -> Any:
    """A not yet started Connect worker streaming `tables` ("schema.table") as Avro.

    The converter is set on the connector (Connect's per-connector override), so its
    properties file is the whole story `bridge import-debezium` reads."""
    log = workdir / f"{prefix}-build.log"
    java_home = Path(dbz._install.find_java_home(dbz.COMPONENT, log))
    return dbz.Debezium(
        stack,
        dbname=dbname,
        table="",
        slot=slot,
        publication=publication,
        prefix=prefix,
        workdir=workdir,
        schemas=True,
        connector={
            "table.include.list": ",".join(tables),
            "snapshot.mode": "initial",
            **dbz.avro_converter(stack.registry_url),
        },
        extra_libs=[dbz.avro_converter_libs(java_home, log)],
    )
