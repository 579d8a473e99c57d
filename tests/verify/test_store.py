"""`bridge.verify.store.KeyStore` in its two storages: a dict, and an SQLite file once the
memory budget is passed (pure, no servers: the file goes to pytest's tmp_path)."""

from __future__ import annotations

import gc
import io
from pathlib import Path

import fastavro
import pytest

from bridge.errors import VerifyError
from bridge.verify.store import (
    ENTRY_OVERHEAD,
    Kept,
    KeyStore,
    entry_size,
    long_body,
    ordered_long,
)

# bytes of the memory budget: never passed; passed at the first key (every later write
# goes straight to the file); passed after three keys (the dict then buffers writes and
# is flushed every couple of them, so states are found in the buffer and in the file)
BUDGETS = {"memory": 1 << 30, "disk": 0, "spilling": 3 * (ENTRY_OVERHEAD + 40)}


def name(i: int) -> bytes:
    return i.to_bytes(2, "big")


def kept(i: int, lsn: int, deleted: bool = False) -> Kept:
    return Kept(lsn, deleted, bytes([i % 251]) * 24, i % 3, b"\0\0\0\0\1" + name(i))


def workload(store: KeyStore) -> list[Kept | None]:
    """Writes, overwrites, deletes and a TRUNCATE, with what `get` saw along the way."""
    seen = []
    for i in range(10):
        store.put(name(i), kept(i, 10 + i))
    seen += [store.get(name(i)) for i in (0, 5, 9, 10)]
    store.put(name(2), kept(2, 30))  # an update of a key that may be on disk already
    store.put(name(3), kept(3, 31, deleted=True))
    store.put(name(11), kept(11, 32))
    seen += [store.get(name(i)) for i in (2, 3, 11)]
    store.drop_older(15)  # keys 0-4 older than it go, except the two changed later
    for i in range(20, 26):
        store.put(name(i), kept(i, 40))
    seen += [store.get(name(i)) for i in (0, 2, 3, 20, 25)]
    return seen


@pytest.mark.parametrize("budget", ["disk", "spilling"])
def test_the_file_holds_what_the_dict_holds(budget: str, tmp_path: Path) -> None:
    memory = KeyStore(BUDGETS["memory"], str(tmp_path))
    other = KeyStore(BUDGETS[budget], str(tmp_path))
    assert workload(other) == workload(memory)
    assert not memory.on_disk and other.on_disk
    assert sorted(other.items()) == sorted(memory.items())
    assert other.live_count() == memory.live_count() == 13  # 2, 5-9, 11, 20-25
    assert (name(3) in other, name(0) in other) == (True, False)
    other.close()


def test_the_workload_itself() -> None:
    """What both storages must agree on."""
    store = KeyStore(BUDGETS["memory"])
    seen = workload(store)
    assert seen == [
        kept(0, 10),
        kept(5, 15),
        kept(9, 19),
        None,
        kept(2, 30),
        kept(3, 31, deleted=True),
        kept(11, 32),
        None,
        kept(2, 30),
        kept(3, 31, deleted=True),
        kept(20, 40),
        kept(25, 40),
    ]
    expected = {2, 3, 5, 6, 7, 8, 9, 11, *range(20, 26)}
    assert sorted(n for n, _ in store.items()) == sorted(name(i) for i in expected)


@pytest.mark.parametrize("budget", list(BUDGETS))
def test_claim_takes_states_out(budget: str, tmp_path: Path) -> None:
    """Live and deleted states of the names asked for leave the store; what is left are the
    keys nobody asked for."""
    store = KeyStore(BUDGETS[budget], str(tmp_path))
    for i in range(1200):  # past one SQLite statement's worth of keys
        store.put(name(i), kept(i, i, deleted=i % 100 == 0))
    asked = [name(i) for i in range(0, 1300, 2)]
    claimed = store.claim(asked)
    assert claimed == {name(i): kept(i, i, deleted=i % 100 == 0) for i in range(0, 1200, 2)}
    assert store.claim(asked) == {}
    assert sorted(store.items()) == [(name(i), kept(i, i)) for i in range(1, 1200, 2)]
    assert store.live_count() == 600
    store.close()


def test_the_file_is_removed(tmp_path: Path) -> None:
    """By `close`, or when the store is collected without it."""
    closed = KeyStore(0, str(tmp_path))
    closed.put(name(1), kept(1, 1))
    assert closed.on_disk and len(list(tmp_path.iterdir())) == 1
    closed.close()
    assert list(tmp_path.iterdir()) == []
    dropped = KeyStore(0, str(tmp_path))
    dropped.put(name(1), kept(1, 1))
    assert len(list(tmp_path.iterdir())) == 1
    del dropped
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_memory_estimate_follows_the_keys() -> None:
    """The dict's estimated size rises and falls with its states; passing the budget moves
    them to disk."""
    one = entry_size(name(1), kept(1, 1))
    store = KeyStore(3 * one)
    for i in range(3):
        store.put(name(i), kept(i, i))
    store.put(name(1), kept(1, 5))  # an overwrite adds nothing
    assert not store.on_disk
    store.claim([name(0)])
    store.put(name(3), kept(3, 3))  # fits in the room the claimed key left
    assert not store.on_disk
    store.put(name(4), kept(4, 4))
    assert store.on_disk
    assert sorted(store.items()) == [(name(i), kept(i, 5 if i == 1 else i)) for i in range(1, 5)]
    store.close()


def test_no_room_for_the_file_is_a_typed_error(tmp_path: Path) -> None:
    store = KeyStore(0, str(tmp_path / "missing"))
    with pytest.raises(VerifyError, match=r"key store under .*missing failed") as failed:
        store.put(name(1), kept(1, 1))
    assert "--memory-limit-mb" in str(failed.value)


def avro_long(n: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema({"type": "long"}), n)
    return out.getvalue()


LONGS = [0, 1, -1, 63, 64, -64, -65, 127, 128, 300, 10_000_000, -(2**31), 2**31, 2**63 - 1]
LONGS += [-(2**63)]


def test_integer_keys_are_stored_in_numeric_order() -> None:
    """A key of one integer column is stored as 8 bytes that sort like the number (Avro's
    zigzag varints do not), and read back as its Avro body."""
    bodies = [avro_long(n) for n in LONGS]
    assert [long_body(ordered_long(b)) for b in bodies] == bodies
    assert sorted(bodies, key=ordered_long) == [avro_long(n) for n in sorted(LONGS)]
    assert sorted(bodies) != [avro_long(n) for n in sorted(LONGS)]


@pytest.mark.parametrize("budget", list(BUDGETS))
def test_integer_keys_in_both_storages(budget: str, tmp_path: Path) -> None:
    store = KeyStore(BUDGETS[budget], str(tmp_path), integer_key=True)
    for i, n in enumerate(LONGS):
        store.put(avro_long(n), kept(i, i, deleted=n == 1))
    assert store.get(avro_long(300)) == kept(LONGS.index(300), LONGS.index(300))
    assert store.get(avro_long(2)) is None
    assert sorted(store.items()) == sorted(
        (avro_long(n), kept(i, i, deleted=n == 1)) for i, n in enumerate(LONGS)
    )
    assert store.live_count() == len(LONGS) - 1
    claimed = store.claim([avro_long(n) for n in (-1, 1, 2, 2**63 - 1)])
    assert claimed == {
        avro_long(-1): kept(2, 2),
        avro_long(1): kept(1, 1, deleted=True),
        avro_long(2**63 - 1): kept(13, 13),
    }
    assert store.on_disk == (budget != "memory")
    store.close()
