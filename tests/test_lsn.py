import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import ConfigError
from bridge.lsn import LSN


def test_parse_and_format() -> None:
    lsn = LSN.parse("16/B374D848")
    assert lsn == (0x16 << 32) | 0xB374D848
    assert str(lsn) == "16/B374D848"
    assert repr(lsn) == "LSN('16/B374D848')"
    assert str(LSN(0)) == "0/0"


def test_ordering_is_numeric() -> None:
    assert LSN.parse("1/0") > LSN.parse("0/FFFFFFFF")
    assert sorted([LSN.parse("2/1"), LSN.parse("0/10"), LSN.parse("1/0")]) == [
        LSN.parse("0/10"),
        LSN.parse("1/0"),
        LSN.parse("2/1"),
    ]


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_round_trip(value: int) -> None:
    assert LSN.parse(str(LSN(value))) == value


@pytest.mark.parametrize(
    "text", ["", "1", "1/", "/1", "G/0", "1/2/3", "123456789/0", "0/123456789"]
)
def test_bad_text_is_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        LSN.parse(text)


def test_out_of_range() -> None:
    with pytest.raises(ValueError):
        LSN(-1)
    with pytest.raises(ValueError):
        LSN(1 << 64)
