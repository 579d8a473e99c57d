"""`bridge.verify.store.KeyStore` in its two storages: a dict, and hash partitions on disk
once the records would pass the memory budget; and PostgreSQL's rows compared with it the
two ways `bridge.verify.compare` does (pure, no servers: the files go to pytest's
tmp_path; budgets of a few hundred bytes, so that every partition holds a few keys)."""

from __future__ import annotations

import gc
import struct
from pathlib import Path

import pytest

from bridge.errors import VerifyError
from bridge.verify import scan
from bridge.verify.store import ENTRY_OVERHEAD, MAX_PARTITIONS, PG_FIXED, KeyStore, budget

COLUMNS = 2
NULLS = scan.digest(b"\0") * COLUMNS


def ident(i: int) -> bytes:
    return scan.ident(i.to_bytes(3, "big"))


def state(i: int, lsn: int, flags: int = 0, row: int | None = None) -> bytes:
    """A whole row's entry (its row digest `row`, default i) of key i."""
    digests = scan.digest(bytes([i % 251])) + scan.digest(b"c")
    packed = struct.pack("<qBqiqi", lsn, flags, i if row is None else row, i % 3, 100 + i, 7)
    return packed + digests


def store(budget_bytes: int, tmp_path: Path, records: int = 300) -> KeyStore:
    return KeyStore(budget_bytes, NULLS, expected=records, directory=str(tmp_path))


def everything(keys: KeyStore) -> dict[bytes, bytes]:
    if not keys.on_disk:
        return dict(keys.states())
    return {k: s for states, _ in keys.partitioned() for k, s in states.items()}


def workload(keys: KeyStore) -> None:
    for i in range(300):
        keys.put(ident(i), state(i, 10 + i))
    keys.put(ident(2), state(2, 400))  # a later change of a key
    keys.put(ident(3), state(3, 401, scan.DELETED))
    keys.put(ident(0), state(0, 0))  # an older change read later: the newest read wins
    truncate = state(0, 150, scan.TRUNCATE)
    keys.put(b"", truncate)  # keys 0-139 older than it go, but the two changed later
    for i in range(500, 520):
        keys.put(ident(i), state(i, 500))


@pytest.mark.parametrize("limit", [300, 2000])
def test_the_partitions_hold_what_the_dict_holds(limit: int, tmp_path: Path) -> None:
    memory, disk = store(1 << 30, tmp_path), store(limit, tmp_path)
    assert not memory.on_disk and disk.on_disk and disk.partitions > 2
    workload(memory)
    workload(disk)
    assert everything(disk) == everything(memory)
    kept = dict(memory.states())
    assert len(kept) == 2 + 160 + 20  # 2, 3, 150-299, 500-519
    assert not scan.live(kept[ident(3)])
    assert (memory.truncated, disk.truncated) == (150, 150)
    disk.close()
    assert list(tmp_path.iterdir()) == []


def test_a_moved_key_lives_on_in_the_old_keys_partition(tmp_path: Path) -> None:
    """A key change's create carrying values: the new key's later records, and
    PostgreSQL's row of it, go where the old key's state is."""
    disk = store(300, tmp_path)
    old, new = ident(1), ident(2)
    disk.put(new, state(2, 5))  # the new key once lived on its own, then went
    disk.put(new, state(2, 6, scan.DELETED))
    disk.put(old, state(1, 10))
    carried = state(2, 20, scan.CARRY | scan.NO_ROW | scan.MOVED)
    carried = carried[: scan.COLUMNS_AT] + scan.UNSENT + carried[scan.COLUMNS_AT + 8 :]
    disk.put(old, state(1, 20, scan.DELETED))
    disk.put(new, carried, moved_from=old)
    disk.put(new, state(2, 30, row=77)[: scan.COLUMNS_AT] + state(2, 30)[scan.COLUMNS_AT :])
    disk.add_row(new, bytes(PG_FIXED) + NULLS)
    found = {}
    rows = {}
    for states, chunks in disk.partitioned():
        found.update(states)
        for chunk in chunks:
            for at in range(0, len(chunk), disk.row_width):
                rows[chunk[at : at + scan.IDENT]] = states.get(chunk[at : at + scan.IDENT])
    assert scan.lsn_of(found[new]) == 30 and scan.live(found[new])
    assert rows[new] == found[new]  # the row met its key's state in the same partition
    disk.close()


def test_a_carried_value_comes_from_the_key_or_the_moved_key_or_is_null() -> None:
    fold = scan.Fold(NULLS)
    fold.add(ident(1), state(1, 10))
    unsent = state(1, 20, scan.CARRY | scan.NO_ROW)
    unsent = unsent[: scan.COLUMNS_AT] + scan.UNSENT + unsent[scan.COLUMNS_AT + 8 :]
    fold.add(ident(1), unsent)
    carried = fold.states[ident(1)]
    assert carried[scan.COLUMNS_AT : scan.COLUMNS_AT + 8] == state(1, 10)[scan.COLUMNS_AT :][:8]
    assert scan.flags_of(carried) & scan.NO_ROW and not scan.flags_of(carried) & scan.CARRY
    fold.add(ident(9), unsent)  # a key with no earlier state: null
    assert fold.states[ident(9)][scan.COLUMNS_AT : scan.COLUMNS_AT + 8] == NULLS[:8]


def test_rows_settle_the_same_in_memory_and_on_disk(tmp_path: Path) -> None:
    """PostgreSQL's rows against the states: settled by the row digest, or left for the
    column comparison (a different row, a deleted key, no key), and the ghosts left."""
    same = hash(b"same")

    def bodies(kinds: bytes, row: tuple[bytes | None, ...]) -> tuple[bytes, bytes]:
        i = int(row[0] or b"0")
        return i.to_bytes(3, "big"), b"differs" if i % 50 == 0 else b"same"

    table: list[tuple[bytes | None, ...]] = [(str(i).encode(), b"x") for i in range(1, 219)]
    memory, disk = store(1 << 30, tmp_path), store(300, tmp_path)
    for keys in (memory, disk):
        for i in range(200):
            keys.put(ident(i), state(i, 10, scan.DELETED if i == 7 else 0, row=same))
    unsettled: list[scan.Unsettled] = []
    equal = scan.settle_rows(memory.memory, table, bodies, b"tt", [0], 0, unsettled)
    in_memory = [(n, texts) for n, _, texts, _, _ in unsettled]
    ghosts_in_memory = sorted(k for k, s in memory.states() if scan.live(s))
    two = {"type": "record", "name": "r", "fields": [{"name": c, "type": "int"} for c in "ab"]}
    scan.spill_rows(disk, table, bodies, b"tt", [0], 0, scan.RowScan(scan.build(two), ["a", "b"]))
    spilled: list[scan.Unsettled] = []
    on_disk = 0
    ghosts_on_disk = []
    for states, chunks in disk.partitioned():
        for chunk in chunks:
            on_disk += scan.settle_chunk(states, chunk, disk.row_width, spilled)
        ghosts_on_disk += [k for k, s in states.items() if scan.live(s)]
    texts_on_disk = []
    for number, _, where, _, _ in spilled:
        at, size = int.from_bytes(where[0][:8], "little"), int.from_bytes(where[0][8:], "little")
        key, texts = scan.row_texts(disk.texts(at, size))
        assert key == int(texts[0]).to_bytes(3, "big")
        texts_on_disk.append((number, texts))
    expected = [b"7", b"50", b"100", b"150"] + [str(i).encode() for i in range(200, 219)]
    assert equal == on_disk == 218 - len(expected)
    assert in_memory == sorted(texts_on_disk)
    assert [t for _, (t,) in in_memory] == expected
    assert sorted(ghosts_on_disk) == ghosts_in_memory == [ident(0)]
    disk.close()


def test_the_files_are_removed(tmp_path: Path) -> None:
    """By `close`, or when the store is collected without it."""
    closed = store(100, tmp_path)
    closed.put(ident(1), state(1, 1))
    assert closed.on_disk and len(list(tmp_path.iterdir())) == 1
    closed.close()
    assert list(tmp_path.iterdir()) == []
    dropped = store(100, tmp_path)
    dropped.put(ident(1), state(1, 1))
    assert len(list(tmp_path.iterdir())) == 1
    del dropped
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_the_budget_decides_the_partitions(tmp_path: Path) -> None:
    width = scan.IDENT + scan.REST + len(NULLS)
    per_key = ENTRY_OVERHEAD + width
    room = budget(1 << 30)
    assert KeyStore(1 << 30, NULLS, expected=room // per_key).partitions == 1
    keys = KeyStore(1 << 30, NULLS, expected=3 * room // per_key + 1, directory=str(tmp_path))
    assert keys.partitions == 4
    keys.close()
    huge = KeyStore(1 << 20, NULLS, expected=10**12, directory=str(tmp_path))
    assert huge.partitions == MAX_PARTITIONS
    huge.close()
    few = KeyStore(1, NULLS, expected=80, directory=str(tmp_path))
    assert few.partitions == 10  # no emptier partitions than 8 records each
    few.close()
    assert KeyStore(0, NULLS, expected=10**6, in_memory=True).partitions == 1


def test_no_room_for_the_files_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(VerifyError, match=r"key store under .*missing failed") as failed:
        store(100, tmp_path / "missing")
    assert "--memory-limit-mb" in str(failed.value)
