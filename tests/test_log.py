import json
import logging

import pytest

from bridge import log


def test_secrets_are_masked_in_messages_args_and_tracebacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.setup("INFO", "text", ["hunter2", "tok"])
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


def test_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    log.setup("INFO", "json", ["pw"])
    logging.getLogger("x").warning("using pw now")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["level"] == "WARNING"
    assert record["msg"] == f"using {log.MASK} now"
