"""Bad configuration through the real CLI: exit code 2 and ONE actionable `error:` line.

Every case is run through both `bridge run` and `bridge check`: the first line
starts with "error: ", names the file or field and what is wrong, and ends with
what to do in parentheses; no traceback. Nothing here needs the stack: the
configuration is refused before any connection. The matrix runs the CLI app
in-process; `test_the_real_entry_point` proves the same through `python -m bridge`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from badinput.cli import bridge, error_line, invoke, write_config

COMMANDS = ["run", "check"]

# (file text, fragments of the error line: the problem, then the advice)
FILES = {
    "yaml-syntax": ("source: [1\n", ["not valid YAML at line 2, column 1", "(fix the YAML"]),
    "yaml-tab": ("source:\n\thost: x\n", ["not valid YAML at line 2, column 1", "'\\t'"]),
    "yaml-python-tag": (
        "source: !!python/object/apply:os.system [id]\n",
        ["not valid YAML at line 1", "python/object/apply", "(fix the YAML"],
    ),
    "list-at-top": ("- source\n- kafka\n", ["top level must be a mapping, got list", "'source:'"]),
    "number-key": ("1: x\n", ["top-level key 1 is not a section name", "(use the section"]),
    "wrong-type": ("source:\n  port: seventy\n", ["source.port: Input should be a valid integer"]),
    "out-of-range": ("source:\n  port: 70000\n", ["source.port: Input should be less than"]),
    "unknown-key": ("sourse:\n  host: db\n", ["sourse: unknown key (remove it"]),
    "unknown-plugin": ("source:\n  plugin: wal2json\n", ["source.plugin: Input should be"]),
    "section-not-mapping": ("kafka: localhost\n", ["kafka: Input should be a valid dictionary"]),
    "bad-regex": ("filters:\n  include_tables: ['(']\n", ["invalid regular expression '('"]),
    "streaming-v1": (
        "source:\n  proto_version: 1\n  streaming: 'on'\n",
        ["streaming needs proto_version >= 2"],
    ),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", sorted(FILES))
def test_malformed_files(tmp_path: Path, command: str, case: str) -> None:
    text, fragments = FILES[case]
    path = tmp_path / "bridge.yaml"
    path.write_text(text)
    line = error_line(invoke(command, "--config", str(path)), 2)
    assert str(path) in line or "invalid configuration:" in line
    for fragment in fragments:
        assert fragment in line


@pytest.mark.parametrize("command", COMMANDS)
def test_not_utf8(tmp_path: Path, command: str) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("source:\n  host: zürich\n".encode("latin-1"))
    line = error_line(invoke(command, "--config", str(path)), 2)
    assert line == f"error: {path}: not UTF-8 text (byte 17) (save the file as UTF-8)"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("where", ["missing.yaml", ""])
def test_unreadable_path(tmp_path: Path, command: str, where: str) -> None:
    path = tmp_path / where  # a file that does not exist, or a directory
    line = error_line(invoke(command, "--config", str(path)), 2)
    assert line.startswith(f"error: cannot read config file {path}: ")
    assert line.endswith("(pass an existing YAML file with --config)")


@pytest.mark.parametrize("command", COMMANDS)
def test_several_problems_first_line_then_one_per_field(tmp_path: Path, command: str) -> None:
    path = write_config(tmp_path / "b.yaml", source={"port": "x", "slotname": "s"})
    result = invoke(command, "--config", str(path))
    line = error_line(result, 2)
    assert line.startswith("error: invalid configuration: source.port: ")
    assert "(+1 more problem(s), all listed below)" in line
    assert line.endswith("(fix the field(s) in the file or the BRIDGE_* environment)")
    details = result.stderr.splitlines()[-2:]
    assert details[0].startswith("  source.port: ")
    assert details[1] == "  source.slotname: unknown key (remove it or check its spelling)"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("BRIDGE_SOURCE__PORT", "abc", "source.port: Input should be a valid integer"),
        ("BRIDGE_KAFKA", "{not json", 'error parsing value for field "kafka"'),
        ("BRIDGE_SOURCE__SLOT_NAME", "Prod-Slot", "source.slot_name: String should match"),
    ],
)
def test_bad_environment_override(command: str, variable: str, value: str, fragment: str) -> None:
    line = error_line(invoke(command, env={variable: value}), 2)
    assert fragment in line


HOSTILE_SLOT_NAMES = [
    '"; DROP TABLE victim; --',
    "Robert'); --",
    "zürich",
    'a"b',
    "sp ace",
    "UPPER",
    "dash-ed",
    "",
    "x" * 64,
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", HOSTILE_SLOT_NAMES)
def test_slot_names_follow_postgresql_rules(tmp_path: Path, command: str, name: str) -> None:
    """PostgreSQL allows only [a-z0-9_]{1,63} in slot names; the config says so up front."""
    path = write_config(tmp_path / "b.yaml", source={"slot_name": name})
    line = error_line(invoke(command, "--config", str(path)), 2)
    assert "source.slot_name: String should match pattern '^[a-z0-9_]{1,63}$'" in line


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", ["yaml-syntax", "wrong-type"])
def test_the_real_entry_point(tmp_path: Path, command: str, case: str) -> None:
    path = tmp_path / "bridge.yaml"
    path.write_text(FILES[case][0])
    line = error_line(bridge(command, "--config", str(path)), 2)
    assert line == error_line(invoke(command, "--config", str(path)), 2)
