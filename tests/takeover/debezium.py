"""Debezium's PostgreSQL connector writing Avro into the local stack, for the take-over tests.

The Connect worker is bench/compare_debezium.py's (jars from Maven Central, cached per
machine); here it gets Apicurio's Avro converter (Confluent wire format, subjects
`<topic>-key` / `<topic>-value`) so the registry holds Debezium's own subjects.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _load_bench_module(name: str) -> Any:
    """bench/<name>.py by its path: bench/ itself stays off the tests' sys.path, where its
    scripts (decode.py, encode.py, snapshot.py, ...) would shadow the tests' packages."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


dbz: Any = _load_bench_module("compare_debezium")


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
