"""verify's topic consumers: fetch queues bounded by the memory budget, fetched again soon
after the fold took from them (librdkafka's default waits a second once a queue is past
its bounds, which held a read to one queue's worth of records a second)."""

from __future__ import annotations

from bridge.config import load_config
from bridge.verify.topic import consumer_config, queue_kib


def test_a_full_queue_is_fetched_again_within_milliseconds_at_every_budget() -> None:
    cfg = load_config(None)
    for limit_mb in (16, 256, 2048):
        queue = queue_kib(limit_mb * 2**20)
        config = consumer_config(cfg, partitions=3, queue=queue)
        assert config["fetch.queue.backoff.ms"] <= 50
        assert config["queued.max.messages.kbytes"] * 3 <= max(queue, 3 * 512)
