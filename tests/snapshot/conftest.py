"""Fixtures for the snapshot tests: a configuration factory and a pipeline on a thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from running import PipelineThread, start

from bridge.config import Config

from .helpers import RunBridge, TopicReader, settings

Settings = Callable[..., dict[str, Any]]


@pytest.fixture
def make_settings(
    stack: Any, pg_db: str, slot_name: str, publication_name: str, topic_prefix: str, tmp_path: Path
) -> Settings:
    """`make_settings(mode="initial", chunk_size=..., ...)`: the bridge config for this test."""

    def make(**snapshot: Any) -> dict[str, Any]:
        return settings(
            stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill", **snapshot
        )

    return make


@pytest.fixture
def run_bridge(make_settings: Settings) -> Iterator[RunBridge]:
    """A Pipeline on a thread with these snapshot options, stopped at the end if still running."""
    started: list[PipelineThread] = []

    def start_one(**snapshot: Any) -> PipelineThread:
        bridge = start(Config(**make_settings(**snapshot)))
        started.append(bridge)
        return bridge

    yield start_one
    for bridge in started:
        if bridge.alive():
            bridge.stop()


@pytest.fixture
def topic(stack: Any, topic_prefix: str) -> Iterator[Callable[[str], TopicReader]]:
    """`topic("public.t")`: a reader of that table's topic from its beginning."""
    readers: list[TopicReader] = []

    def open_reader(table: str) -> TopicReader:
        reader = TopicReader(stack.kafka_bootstrap, stack.registry_url, f"{topic_prefix}.{table}")
        readers.append(reader)
        return reader

    yield open_reader
    for reader in readers:
        reader.close()
