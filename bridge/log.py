"""Logging set-up: human-readable or JSON lines, with secrets masked at the source.

Every configured secret is registered with `SecretMask`; the filter scrubs it from
each record's final message, so a password echoed by a library error never
reaches a log line.

Logs are for people: one line per distinct problem. librdkafka logs every failed attempt
of a retry loop (a refused connection, ~20 a second), so its lines go through `ClientLog`,
which logs each distinct message once and counts its repeats. Libraries that log every
HTTP request or RPC at INFO (the registry client's HTTP library, py4j) are held at WARNING
unless the level is DEBUG.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

MASK = "***"

# Third-party loggers that speak at INFO once per request: `bridge run` would print four
# registry requests per table at start-up, a Spark job one py4j line per call.
CHATTY_LIBRARIES = ("httpx", "httpx2", "httpcore", "py4j", "urllib3")


class SecretMask(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            record.msg = self.scrub(record.getMessage())
            record.args = None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = self.scrub(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_text:
            out["exc"] = record.exc_text
        elif record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def setup(level: str, fmt: str, secrets: Iterable[str] = ()) -> SecretMask:
    """Configure the root logger once; returns the mask for scrubbing other output."""
    handler = logging.StreamHandler(sys.stderr)
    mask = SecretMask(secrets)
    handler.addFilter(mask)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
    return mask


# librdkafka's own additions to a message that make repeats of one problem look distinct:
# the thread that logged it, how long the attempt took, its count of suppressed repeats.
_THREAD = re.compile(r"^\[thrd:[^\]]*\]: ")
_ATTEMPT = re.compile(
    r" \(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)"
    r"|:? \d+ identical error\(s\) suppressed"
)


@dataclass
class _Seen:
    line: str  # the message as first seen, without librdkafka's attempt details
    level: int
    since: float  # start of the count not yet reported
    repeats: int = 0  # seen again since `since`, not reported yet


class ClientLog:
    """librdkafka's `logger` (confluent-kafka calls `log(level, fmt, fac, name, message)`):
    one line per distinct message, with a count instead of every repeat.

    Warnings and errors are keyed by facility and message without the parts that change
    between attempts; DEBUG and INFO lines (asked for with `kafka.producer.debug`) pass as
    they come. The first of a kind is logged at once; repeats are counted, and reported in
    one line when the message comes again `every` seconds after the last report, and by
    `close()`. With `hold=True` (a one-shot command such as `bridge check`) even the first
    is held, so `close()` logs each problem once with its count. After `close()` the
    client says nothing more: a command that has reported is not followed by its clients'
    retries. Called from whichever thread polls the client, hence the lock.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        every: float = 60.0,
        hold: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._every = every
        self._hold = hold
        self._clock = clock
        self._seen: dict[tuple[str, str], _Seen] = {}
        self._lock = threading.Lock()
        self._closed = False

    def log(self, level: int, fmt: str, *args: object) -> None:
        fac, name, message = (str(a) for a in args) if len(args) == 3 else ("", "", fmt % args)
        message = _THREAD.sub("", message)
        if level < logging.WARNING:
            if not self._closed:
                self._logger.log(level, "%s [%s] %s", fac, name, message)
            return
        plain = _ATTEMPT.sub("", message)
        now = self._clock()
        with self._lock:
            if self._closed:
                return
            seen = self._seen.get((fac, plain))
            if seen is None:
                self._seen[(fac, plain)] = _Seen(f"{fac} [{name}] {plain}", level, now)
                if not self._hold:
                    self._logger.log(level, "%s", f"{fac} [{name}] {plain}")
                return
            seen.repeats += 1
            if self._hold or now - seen.since < self._every:
                return
            report = self._report(seen, now)
        self._logger.log(seen.level, "%s", report)

    def _report(self, seen: _Seen, now: float) -> str:
        if self._hold:
            # no span: a held client's lines are often all served by one poll at the end
            count = seen.repeats + 1
            line = seen.line if count == 1 else f"{seen.line} ({count} times)"
        else:
            line = f"{seen.line} ({seen.repeats} more time(s) in {now - seen.since:.0f} s)"
        seen.repeats, seen.since = 0, now
        return line

    def close(self) -> None:
        """Report what is still counted, then drop whatever the client logs from now on."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            now = self._clock()
            due = [s for s in self._seen.values() if self._hold or s.repeats]
            reports = [(s.level, self._report(s, now)) for s in due]
        for level, line in reports:
            self._logger.log(level, "%s", line)
