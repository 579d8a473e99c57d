"""Fixtures for the snapshot tests: a configuration factory and a pipeline on a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.build import build_pipeline
from bridge.config import Config

from .helpers import TopicReader, settings

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


class Running:
    """A `Pipeline` on a daemon thread; what it died of is re-raised by `stop()`."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.pipeline = build_pipeline(Config(**config))
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="bridge", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.pipeline.run()
        except BaseException as exc:
            self.error = exc

    def finished(self) -> bool:
        return not self.thread.is_alive()

    def stop(self, timeout: float = 60.0) -> None:
        self.pipeline.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "pipeline did not stop"
        if self.error is not None:
            raise self.error


@pytest.fixture
def run_bridge() -> Iterator[Callable[[dict[str, Any]], Running]]:
    started: list[Running] = []

    def start(config: dict[str, Any]) -> Running:
        running = Running(config)
        started.append(running)
        return running

    yield start
    for running in started:
        if not running.finished():
            running.stop()


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
