import json
import logging
from collections.abc import Callable, Iterable, Iterator

import pytest

from bridge import log

Setup = Callable[[str, str, Iterable[str]], log.SecretMask]


@pytest.fixture(autouse=True)
def library_levels() -> Iterator[None]:
    """`log.setup` sets the levels of chatty libraries' loggers (and the demo the Kafka
    client's): put them back, as later tests in this process count those libraries' lines."""
    names = (*log.CHATTY_LIBRARIES, "bridge.kafka")
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture
def setup(capsys: pytest.CaptureFixture[str]) -> Iterator[Setup]:
    """`log.setup`, undone after the test. It points the root logger at sys.stderr, here
    capsys's stream, which is closed after the test: a handler left there would turn every
    later record of the run into a "--- Logging error ---" (py4j's "Closing down
    clientserver connection", logged at interpreter exit, was one)."""
    root = logging.getLogger()
    level, installed = root.level, []

    def run(level_name: str, fmt: str, secrets: Iterable[str]) -> log.SecretMask:
        mask = log.setup(level_name, fmt, secrets)
        installed.extend(root.handlers)
        return mask

    yield run
    for handler in installed:
        root.removeHandler(handler)
    root.setLevel(level)


def test_secrets_are_masked_in_messages_args_and_tracebacks(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup("INFO", "text", ["hunter2", "tok"])
    logger = logging.getLogger("test")
    logger.info("password=%s", "hunter2")
    try:
        raise RuntimeError("login failed for hunter2")
    except RuntimeError:
        logger.exception("boom tok")
    err = capsys.readouterr().err
    assert "hunter2" not in err
    assert "tok" not in err.replace("token", "")
    assert err.count(log.MASK) >= 3


def test_json_lines(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    setup("INFO", "json", ["pw"])
    logging.getLogger("x").warning("using pw now")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["level"] == "WARNING"
    assert record["msg"] == f"using {log.MASK} now"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refused(after_ms: int, suppressed: int = 0) -> tuple[int, str, str, str, str]:
    """One of librdkafka's connect failures as confluent-kafka hands it to `logger.log`."""
    more = f", {suppressed} identical error(s) suppressed" if suppressed else ""
    return (
        logging.ERROR,
        "%s [%s] %s",
        "FAIL",
        "rdkafka#producer-1",
        "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 "
        f"failed: Connection refused (after {after_ms}ms in state CONNECT{more})",
    )


def test_a_repeated_client_error_is_one_line_then_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    client_log = log.ClientLog(logging.getLogger("bridge.kafka"), every=60.0, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="bridge.kafka"):
        for i in range(200):
            client_log.log(*refused(i % 3, suppressed=i % 5))
            clock.now += 0.05
        assert [r.getMessage() for r in caplog.records] == [
            "FAIL [rdkafka#producer-1] 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 "
            "failed: Connection refused"
        ]
        clock.now += 60
        client_log.log(*refused(7))
        assert (
            caplog.records[-1]
            .getMessage()
            .endswith("Connection refused (200 more time(s) in 70 s)")
        )
        assert caplog.records[-1].levelno == logging.ERROR
        client_log.log(*refused(1))
        client_log.close()
        assert caplog.records[-1].getMessage().endswith("(1 more time(s) in 0 s)")
        count = len(caplog.records)
        client_log.log(*refused(1))
        client_log.log(logging.DEBUG, "%s [%s] %s", "BROKER", "rdkafka#producer-1", "late")
        assert len(caplog.records) == count, "a closed client log says nothing more"


def test_held_client_lines_come_once_each_with_their_count_at_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client_log = log.ClientLog(logging.getLogger("bridge.kafka"), hold=True)
    with caplog.at_level(logging.DEBUG, logger="bridge.kafka"):
        for i in range(150):
            client_log.log(*refused(i))
        client_log.log(logging.WARNING, "%s [%s] %s", "GETPID", "rdkafka#producer-2", "retrying")
        client_log.log(logging.DEBUG, "%s [%s] %s", "BROKER", "rdkafka#producer-1", "detail")
        assert [r.getMessage() for r in caplog.records] == [
            "BROKER [rdkafka#producer-1] detail"  # asked-for debug detail passes as it comes
        ]
        client_log.close()
    lines = [r.getMessage() for r in caplog.records[1:]]
    assert lines == [
        "FAIL [rdkafka#producer-1] 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 "
        "failed: Connection refused (150 times)",
        "GETPID [rdkafka#producer-2] retrying",
    ]


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_libraries_that_log_each_request_speak_at_debug_only(
    setup: Setup, capsys: pytest.CaptureFixture[str], level: str, shown: bool
) -> None:
    setup(level, "text", [])
    for name in ("httpx", "httpx2", "py4j.clientserver"):
        logging.getLogger(name).info("HTTP Request: GET /subjects/t-value/versions/latest")
        logging.getLogger(name).warning("a real problem")
    err = capsys.readouterr().err
    assert ("HTTP Request" in err) is shown
    assert err.count("a real problem") == 3


def test_the_demo_shows_the_bridge_s_warnings_not_the_kafka_client_s_retries(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bridge import demo  # noqa: PLC0415 (imports the Kafka and registry clients)

    root, kafka = logging.getLogger(), logging.getLogger("bridge.kafka")
    handlers, root_level = root.handlers[:], root.level
    try:
        demo.quiet_logs()
        kafka.warning("GETPID [rdkafka#producer-1] Coordinator load in progress: retrying")
        logging.getLogger("bridge.pipeline").info("streaming slot demo")
        logging.getLogger("httpx2").info("HTTP Request: GET /subjects")
        logging.getLogger("bridge.pipeline").warning("a real problem")
        kafka.error("FAIL [rdkafka#producer-1] Connect failed")
        lines = capsys.readouterr().err.splitlines()
    finally:
        root.handlers[:] = handlers
        root.setLevel(root_level)
    assert [line.split(": ", 1)[1] for line in lines] == [
        "a real problem",
        "FAIL [rdkafka#producer-1] Connect failed",
    ]
    assert demo.SPARK_LOG_LEVEL == "ERROR"
