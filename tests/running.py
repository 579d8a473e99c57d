"""A Pipeline on a thread, the one way the live tests run the bridge in-process.

The pipeline runs on a daemon thread so the test can write to PostgreSQL and read
Kafka meanwhile. Whatever the run ends with is kept: a test that expects the bridge
to stop on an error takes it with `join()`; any other error is re-raised by `stop()`
(and so on leaving `running(...)`), so a pipeline that died never passes unnoticed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from bridge.build import build_pipeline
from bridge.config import Config
from bridge.pipeline import Pipeline


class PipelineThread:
    """A built `Pipeline` running on a daemon thread from construction on."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.error: BaseException | None = None
        self._taken = False
        self._thread = threading.Thread(target=self._run, name="bridge", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.pipeline.run()
        except BaseException as exc:  # handed to the test thread
            self.error = exc

    def alive(self) -> bool:
        return self._thread.is_alive()

    def check(self) -> None:
        """Re-raise what the pipeline died of; fail if it stopped without an error."""
        if self.error is not None:
            raise self.error
        assert self.alive(), "pipeline stopped by itself"

    def join(self, timeout: float = 60.0) -> BaseException | None:
        """Wait for the run to end by itself (after an error) and take what it ended with:
        the test checks it, `stop()` no longer re-raises it."""
        self._wait(timeout)
        self._taken = True
        return self.error

    def stop(self, timeout: float = 60.0) -> None:
        """Graceful stop and join; re-raises what the pipeline died of, once, unless
        `join()` took it. Stopping again is harmless."""
        self.pipeline.stop()
        self._wait(timeout)
        if self.error is not None and not self._taken:
            self._taken = True
            raise self.error

    def _wait(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the pipeline did not stop within {timeout:.0f}s"


def start(cfg: Config | Pipeline) -> PipelineThread:
    """Run the pipeline `cfg` describes (or one already built, e.g. with a metrics
    registry or a wrapped decoder) on a thread; the slot exists once this returns."""
    return PipelineThread(cfg if isinstance(cfg, Pipeline) else build_pipeline(cfg))


@contextlib.contextmanager
def running(cfg: Config | Pipeline) -> Iterator[PipelineThread]:
    """Stream while the block runs; on leaving it, stop, join and re-raise a failure."""
    bridge = start(cfg)
    try:
        yield bridge
    finally:
        bridge.stop()
