"""`bridge check`'s line on partitioned tables: what PostgreSQL does not send for them in the
publication's root mode (docs/concepts/partitions.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import bridge_settings

from bridge.check import partitions_outlook, run_checks
from bridge.config import Config


def test_no_partitioned_table_is_no_warning() -> None:
    assert partitions_outlook(True, []) == "none published"


def test_through_the_root_warns_of_truncate_attach_and_detach() -> None:
    line = partitions_outlook(True, ["public.measure"])
    assert line.startswith("WARNING: published through their root: public.measure.")
    assert "TRUNCATE of a single partition" in line and "ATTACH or DETACH" in line


def test_per_partition_warns_of_moves_and_attach() -> None:
    names = [f"public.p{i}" for i in range(7)]
    line = partitions_outlook(False, names)
    assert "public.p4 and 2 more." in line and "public.p5" not in line
    assert "moves a row to another partition" in line and "ATTACH PARTITION" in line


@pytest.mark.parametrize("via_root", [True, False])
@pytest.mark.parametrize("exists", [True, False], ids=["publication", "none-yet"])
def test_check_names_the_partitioned_tables(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    tmp_path: Path,
    via_root: bool,
    exists: bool,
) -> None:
    pg_conn.execute(
        "CREATE TABLE measure (id int, region text, PRIMARY KEY (id, region)) "
        "PARTITION BY LIST (region); "
        "CREATE TABLE m_eu PARTITION OF measure FOR VALUES IN ('eu'); "
        "CREATE TABLE plain (id int PRIMARY KEY)"
    )
    if exists:
        pg_conn.execute(
            "CREATE PUBLICATION pub FOR TABLE measure, plain "
            f"WITH (publish_via_partition_root = {str(via_root).lower()})"
        )
    settings = bridge_settings(stack, pg_db, "slot_check", "pub", "check", tmp_path)
    settings["source"]["publish_via_partition_root"] = via_root
    (result,) = [r for r in run_checks(Config(**settings)) if r.name == "partitioned tables"]
    assert result.ok, result.detail
    shown = "public.measure" if via_root else "public.m_eu"
    assert result.detail.startswith("WARNING: published ") and f" {shown}." in result.detail
    assert "plain" not in result.detail
