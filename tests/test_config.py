from pathlib import Path

import pytest

from bridge.config import load_config
from bridge.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bridge.yaml"
    path.write_text(text)
    return path


def test_defaults_without_file() -> None:
    cfg = load_config(None)
    assert cfg.source.plugin == "pgoutput"
    assert cfg.kafka.topic_prefix == "bridge"


def test_yaml_then_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path, "source:\n  host: db.internal\n  port: 5433\nkafka:\n  topic_prefix: shop\n"
    )
    monkeypatch.setenv("BRIDGE_SOURCE__PORT", "6543")
    monkeypatch.setenv("BRIDGE_SOURCE__PASSWORD", "s3cret")
    cfg = load_config(path)
    assert cfg.source.host == "db.internal"
    assert cfg.source.port == 6543
    assert cfg.source.password is not None
    assert cfg.source.password.get_secret_value() == "s3cret"
    assert cfg.kafka.topic_prefix == "shop"
    assert "s3cret" not in repr(cfg)
    assert cfg.secrets() == ["s3cret"]


def test_each_problem_on_its_own_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "source:\n  port: abc\n  slotname: x\n  password: hunter2\n  streaming: sideways\n"
        "kafka:\n  bootstrap_servers: k:9092\nextra_section: 1\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert err.exit_code == 2
    lines = str(err).splitlines()
    assert any(line.strip().startswith("source.port:") and "integer" in line for line in lines)
    assert any(line.strip().startswith("source.slotname: unknown key") for line in lines)
    assert any(line.strip().startswith("source.streaming:") and "'off'" in line for line in lines)
    assert any(line.strip().startswith("extra_section: unknown key") for line in lines)
    assert "hunter2" not in str(err)


def test_secret_input_is_hidden(tmp_path: Path) -> None:
    path = write(tmp_path, "kafka:\n  sasl_password: [1, 2]\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "kafka.sasl_password" in str(info.value)
    assert "<hidden>" in str(info.value)


def test_protocol_option_combinations(tmp_path: Path) -> None:
    path = write(tmp_path, "source:\n  proto_version: 1\n  streaming: 'on'\n")
    with pytest.raises(ConfigError, match="streaming needs proto_version >= 2"):
        load_config(path)
    path = write(tmp_path, "source:\n  proto_version: 2\n  two_phase: true\n")
    with pytest.raises(ConfigError, match="two_phase needs proto_version >= 3"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("source: [1\n", "not valid YAML"), ("- 1\n- 2\n", "top level must be a mapping")],
)
def test_unreadable_yaml(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_config(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml")


def test_kafka_signals_need_watermark_rows_or_read_only(tmp_path: Path) -> None:
    topic_only = "snapshot:\n  signal_kafka_topic: signals\n"
    with pytest.raises(ConfigError, match="read_only: true"):
        load_config(write(tmp_path, topic_only))
    cfg = load_config(write(tmp_path, topic_only + "  read_only: true\n"))
    assert cfg.snapshot.read_only and cfg.snapshot.signal_table is None
    with pytest.raises(ConfigError, match="nothing could start an incremental snapshot"):
        load_config(write(tmp_path, "snapshot:\n  read_only: true\n"))
