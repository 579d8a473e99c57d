import json
import logging
from collections.abc import Callable, Iterable, Iterator

import pytest

from bridge import log

Setup = Callable[[str, str, Iterable[str]], log.SecretMask]


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
