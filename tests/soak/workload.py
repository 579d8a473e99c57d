"""The soak's mixed workload: three tables, every common type, TOAST, key changes, large and
streamed transactions, TRUNCATE, ALTER TABLE, savepoints rolled back, and two-phase commits.

Ground truth is PostgreSQL's own: every transaction that changes a captured table also
appends one `soak_log` row per change (table, key, version, op, xid), in the same
transaction, so a change is in `soak_log` exactly when its transaction committed (crashes,
restarts, promotions, ROLLBACK PREPARED and ROLLBACK TO SAVEPOINT included). `soak_log` is not
published. Every write of a row sets `v`, a per-writer counter, so per key `v` grows in commit
order, and a Kafka record names its change as (table, key, v, op): see oracle.py.

Writers run on threads, each on its own keys (so per key one writer, one order), over a
multi-host DSN that follows the primary. A lost connection is reopened and the writer's idea
of which rows exist is read back from the tables (a COMMIT whose answer was lost may or may
not have happened; `soak_log` knows); a prepared transaction left behind is finished.
Everything random comes from the run's seed.
"""

from __future__ import annotations

import base64
import datetime as dt
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.types.json import Json, Jsonb

TABLES = ("soak_types", "soak_pairs", "soak_docs")
DDL = (
    "CREATE TABLE soak_types (id bigint PRIMARY KEY, v bigint NOT NULL, i2 int2, i4 int4, "
    "i8 int8, num numeric(20,6), f4 real, f8 float8, ok boolean, t text, vc varchar(40), "
    "b bytea, d date, tm time, ts timestamp, tstz timestamptz, iv interval, u uuid, j json, "
    "jb jsonb, arr int4[], tarr text[], ip inet, doc text)",
    "CREATE TABLE soak_pairs (a int, b text, v bigint NOT NULL, note text, PRIMARY KEY (a, b))",
    "CREATE TABLE soak_docs (id bigint PRIMARY KEY, v bigint NOT NULL, body text)",
    "CREATE TABLE soak_log (id bigserial PRIMARY KEY, tbl text NOT NULL, k text, v bigint, "
    "op char(1) NOT NULL, xid bigint NOT NULL)",
    # every change's old row in the WAL, so a delete names the version it removed
    *(f"ALTER TABLE {t} REPLICA IDENTITY FULL" for t in TABLES),
)
MAX_ALTERS = 6  # columns ALTER TABLE may add to soak_types in a run


def key_text(table: str, key: dict[str, Any]) -> str:
    """A key as soak_log spells it: `id`, or `a|b` for soak_pairs."""
    return f"{key['a']}|{key['b']}" if table == "soak_pairs" else str(key["id"])


def setup(dsn: str, publication: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in DDL:
            conn.execute(statement)
        conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE {', '.join(TABLES)}")


def committed(dsn: str) -> set[tuple[str, str | None, int, str]]:
    """Every change of a committed transaction: (table, key, v, op); a TRUNCATE's key is None
    and its v the transaction id (the record's source.txId)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT tbl, k, v, op FROM soak_log").fetchall()
    return {(t, k, int(v), op) for t, k, v, op in rows}


def table_state(dsn: str) -> dict[str, dict[str, int]]:
    """{table: {key: v}} as PostgreSQL holds them now."""
    out: dict[str, dict[str, int]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        out["soak_types"] = {str(i): v for i, v in conn.execute("SELECT id, v FROM soak_types")}
        out["soak_docs"] = {str(i): v for i, v in conn.execute("SELECT id, v FROM soak_docs")}
        out["soak_pairs"] = {
            f"{a}|{b}": v for a, b, v in conn.execute("SELECT a, b, v FROM soak_pairs")
        }
    return out


def key_history(dsn: str, table: str, key: str) -> list[tuple[int, str, int]]:
    """A key's changes in soak_log, as (v, op, xid) in the order logged (one writer per
    key: commit order)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT v, op, xid FROM soak_log WHERE tbl = %s AND k = %s ORDER BY id",
            (table, key),
        ).fetchall()
    return [(int(v), op, int(xid)) for v, op, xid in rows]


class _Tx:
    """One transaction's changes and their soak_log rows."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.logged: list[tuple[str, str | None, int, str]] = []

    def log(self, table: str, key: str | None, v: int, op: str) -> None:
        self.logged.append((table, key, v, op))

    def flush_log(self) -> None:
        if self.logged:
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO soak_log (tbl, k, v, op, xid) "
                    "VALUES (%s, %s, %s, %s, txid_current() %% 4294967296)",
                    self.logged,
                )
            self.logged.clear()


class Writer:
    """A thread committing transactions of `step` until stopped; `errors` counts the
    connection losses it rode out, `done` the transactions it ran."""

    def __init__(
        self, name: str, index: int, dsn: str, seed: int, step: Callable[[Writer, _Tx], None]
    ) -> None:
        self.name, self.dsn, self.rng = name, dsn, random.Random(seed)
        self._step = step
        self.done = 0
        self.reconnects = 0
        self.error: BaseException | None = None
        self._v_base = (index + 1) * 10**12  # this writer's versions
        self._id_base = (index + 1) * 10**9  # and its keys
        self.next_v, self.next_id = self._v_base, self._id_base
        self.types: dict[int, int] = {}  # soak_types id -> v
        self.pairs: dict[tuple[int, str], int] = {}
        self.docs: dict[int, int] = {}
        self.alters = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"soak-{name}", daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def v(self) -> int:
        self.next_v += 1
        return self.next_v

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
                        conn.execute("SET synchronous_commit = on")
                        self._resync(conn)
                        while not self._stop.is_set():
                            self._step(self, _Tx(conn))
                            self.done += 1
                except psycopg.OperationalError:
                    self.reconnects += 1
                    self._stop.wait(0.3)  # the server is restarting or being promoted
        except BaseException as exc:  # handed to the test thread by stop()
            self.error = exc

    def _resync(self, conn: psycopg.Connection[Any]) -> None:
        """Read back which of this writer's rows exist (an in-doubt COMMIT), and finish the
        prepared transactions a lost connection left."""
        lo, hi = self._id_base, self._id_base + 10**9
        self.types = dict(
            conn.execute("SELECT id, v FROM soak_types WHERE id >= %s AND id < %s", (lo, hi))
        )
        self.docs = dict(
            conn.execute("SELECT id, v FROM soak_docs WHERE id >= %s AND id < %s", (lo, hi))
        )
        self.pairs = {
            (a, b): v
            for a, b, v in conn.execute(
                "SELECT a, b, v FROM soak_pairs WHERE b LIKE %s", (f"{self.name}-%",)
            )
        }
        gids = conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s", (f"soak_{self.name}_%",)
        ).fetchall()
        for (gid,) in gids:
            finish = "COMMIT" if self.rng.random() < 0.8 else "ROLLBACK"
            conn.execute(f"{finish} PREPARED '{gid}'")
        top = conn.execute(
            "SELECT max(v) FROM soak_log WHERE v >= %s AND v < %s",
            (self._v_base, self._v_base + 10**12),
        ).fetchone()
        if top and top[0]:
            self.next_v = max(self.next_v, int(top[0]))

    def pace(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), f"writer {self.name} did not stop"
        if self.error is not None:
            raise self.error


# ---- values of every common type -------------------------------------------------------


def _doc(rng: random.Random) -> str | None:
    """Mostly small; one in five big and incompressible, so it is TOASTed out of line."""
    if rng.random() < 0.2:
        return base64.b64encode(rng.randbytes(rng.randrange(3000, 12000))).decode()
    return None if rng.random() < 0.3 else f"doc {rng.random()}"


def _types_row(rng: random.Random) -> dict[str, Any]:
    day = dt.date(2000, 1, 1) + dt.timedelta(days=rng.randrange(20000))
    return {
        "i2": rng.randrange(-32768, 32767),
        "i4": rng.randrange(-(2**31), 2**31 - 1),
        "i8": rng.randrange(-(2**63), 2**63 - 1),
        "num": Decimal(rng.randrange(-(10**12), 10**12)) / Decimal(10**6),
        "f4": rng.choice([1.5, -0.25, 3.0e20, float("inf"), rng.random()]),
        "f8": rng.choice([rng.random() * 1e300, -1e-300, float("nan"), 0.1]),
        "ok": rng.choice([True, False, None]),
        "t": rng.choice(["", "plain", "ünïcödé ✓", "quote ' and \\ back", "tab\tnl\n"]),
        "vc": f"vc{rng.randrange(10**9)}",
        "b": rng.randbytes(rng.randrange(0, 64)),
        "d": day,
        "tm": dt.time(
            rng.randrange(24), rng.randrange(60), rng.randrange(60), rng.randrange(10**6)
        ),
        "ts": dt.datetime(2020, 1, 1) + dt.timedelta(seconds=rng.randrange(10**8)),
        "tstz": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
        + dt.timedelta(microseconds=rng.randrange(10**15)),
        "iv": dt.timedelta(days=rng.randrange(-400, 400), seconds=rng.randrange(86400)),
        "u": uuid.UUID(int=rng.getrandbits(128)),
        "j": Json({"n": rng.randrange(100), "s": "x"}),
        "jb": Jsonb({"k": [1, 2, rng.randrange(9)], "nested": {"ok": True}}),
        "arr": [rng.randrange(-5, 5) for _ in range(rng.randrange(4))],
        "tarr": ["a", "b,c", 'd"e'][: rng.randrange(4)],
        "ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}",
        "doc": _doc(rng),
    }


_TYPE_COLUMNS = tuple(_types_row(random.Random(0)))


@contextmanager
def _transaction(tx: _Tx) -> Iterator[None]:
    with tx.conn.transaction():
        yield
        tx.flush_log()


def _insert_types(w: Writer, tx: _Tx, n: int) -> None:
    for _ in range(n):
        row_id, v = w.new_id(), w.v()
        cols = ", ".join(_TYPE_COLUMNS)
        marks = ", ".join(f"%({c})s" for c in _TYPE_COLUMNS)
        tx.conn.execute(
            f"INSERT INTO soak_types (id, v, {cols}) VALUES (%(id)s, %(v)s, {marks})",
            {"id": row_id, "v": v, **_types_row(w.rng)},
        )
        tx.log("soak_types", str(row_id), v, "c")
        w.types[row_id] = v


def _update_types(w: Writer, tx: _Tx, n: int) -> None:
    for row_id in w.rng.sample(sorted(w.types), min(n, len(w.types))):
        v = w.v()
        if w.rng.random() < 0.5:  # the TOASTed doc unchanged: the new row does not carry it
            cur = tx.conn.execute(
                "UPDATE soak_types SET v = %s, i4 = i4 / 2 WHERE id = %s", (v, row_id)
            )
        else:
            row = _types_row(w.rng)
            sets = ", ".join(f"{c} = %({c})s" for c in _TYPE_COLUMNS)
            cur = tx.conn.execute(
                f"UPDATE soak_types SET v = %(v)s, {sets} WHERE id = %(id)s",
                {"v": v, "id": row_id, **row},
            )
        if cur.rowcount == 1:
            tx.log("soak_types", str(row_id), v, "u")
            w.types[row_id] = v
        else:
            del w.types[row_id]


def _delete_types(w: Writer, tx: _Tx, n: int) -> None:
    for row_id in w.rng.sample(sorted(w.types), min(n, len(w.types))):
        row = tx.conn.execute(
            "DELETE FROM soak_types WHERE id = %s RETURNING v", (row_id,)
        ).fetchone()
        w.types.pop(row_id)
        if row is not None:
            tx.log("soak_types", str(row_id), int(row[0]), "d")


def _pairs(w: Writer, tx: _Tx) -> None:
    """Insert, update, delete or change the key of a soak_pairs row (composite key)."""
    roll = w.rng.random()
    if roll < 0.4 or len(w.pairs) < 5:
        key = (w.rng.randrange(10**6), f"{w.name}-{w.rng.randrange(10**6)}")
        if key in w.pairs:
            return
        v = w.v()
        tx.conn.execute("INSERT INTO soak_pairs VALUES (%s, %s, %s, 'new')", (*key, v))
        tx.log("soak_pairs", f"{key[0]}|{key[1]}", v, "c")
        w.pairs[key] = v
        return
    key = w.rng.choice(sorted(w.pairs))
    old_v = w.pairs[key]
    if roll < 0.65:
        v = w.v()
        tx.conn.execute(
            "UPDATE soak_pairs SET v = %s, note = %s WHERE a = %s AND b = %s",
            (v, f"note {v}", *key),
        )
        tx.log("soak_pairs", f"{key[0]}|{key[1]}", v, "u")
        w.pairs[key] = v
    elif roll < 0.85:  # a primary-key change: a delete of the old key, a create of the new
        new = (key[0] + 10**6, key[1])
        if new in w.pairs:
            return
        v = w.v()
        tx.conn.execute(
            "UPDATE soak_pairs SET a = %s, v = %s WHERE a = %s AND b = %s", (new[0], v, *key)
        )
        tx.log("soak_pairs", f"{key[0]}|{key[1]}", old_v, "d")
        tx.log("soak_pairs", f"{new[0]}|{new[1]}", v, "c")
        del w.pairs[key]
        w.pairs[new] = v
    else:
        tx.conn.execute("DELETE FROM soak_pairs WHERE a = %s AND b = %s", key)
        tx.log("soak_pairs", f"{key[0]}|{key[1]}", old_v, "d")
        del w.pairs[key]


def oltp_step(w: Writer, tx: _Tx) -> None:
    """One small transaction of the mix; now and then a 2PC, a savepoint rolled back, a
    TRUNCATE or an ALTER TABLE."""
    rng = w.rng
    roll = rng.random()
    if roll < 0.06:
        _two_phase(w, tx)
    elif roll < 0.10:
        _savepoint(w, tx)
    elif roll < 0.11:
        with _transaction(tx):
            tx.conn.execute("TRUNCATE soak_docs")
            tx.log("soak_docs", None, _xid(tx), "t")
        w.docs.clear()
    elif roll < 0.115 and w.alters < MAX_ALTERS:
        w.alters += 1
        tx.conn.execute(
            f"ALTER TABLE soak_types ADD COLUMN IF NOT EXISTS extra_{w.alters} int "
            f"DEFAULT {w.alters}"
        )
    else:
        with _transaction(tx):
            _mix(w, tx)
    w.pace(rng.uniform(0, 0.04))


def _xid(tx: _Tx) -> int:
    row = tx.conn.execute("SELECT txid_current() % 4294967296").fetchone()
    assert row is not None
    return int(row[0])


def _mix(w: Writer, tx: _Tx) -> None:
    roll = w.rng.random()
    if roll < 0.35 or len(w.types) < 10:
        _insert_types(w, tx, w.rng.randrange(1, 5))
    elif roll < 0.65:
        _update_types(w, tx, w.rng.randrange(1, 5))
    elif roll < 0.75:
        _delete_types(w, tx, w.rng.randrange(1, 3))
    else:
        _pairs(w, tx)


def _savepoint(w: Writer, tx: _Tx) -> None:
    """Changes rolled back to a savepoint never happened: neither logged nor in Kafka."""
    with _transaction(tx):
        _mix(w, tx)
        kept, types, pairs = list(tx.logged), dict(w.types), dict(w.pairs)
        try:
            with tx.conn.transaction():  # SAVEPOINT ... ROLLBACK TO SAVEPOINT
                _mix(w, tx)
                raise _RollbackError
        except _RollbackError:
            tx.logged[:] = kept
            w.types, w.pairs = types, pairs
        _mix(w, tx)


class _RollbackError(Exception):
    """Leaves the savepoint's block: psycopg rolls back to the savepoint."""


def _two_phase(w: Writer, tx: _Tx) -> None:
    """PREPARE TRANSACTION, then COMMIT PREPARED (4 in 5) or ROLLBACK PREPARED."""
    gid = f"soak_{w.name}_{w.v()}"
    types, pairs = dict(w.types), dict(w.pairs)
    conn = tx.conn
    conn.execute("BEGIN")
    try:
        _mix(w, tx)
        tx.flush_log()
        conn.execute(f"PREPARE TRANSACTION '{gid}'")
    except BaseException:
        if not conn.closed:
            conn.execute("ROLLBACK")
        w.types, w.pairs = types, pairs
        raise
    if w.rng.random() < 0.8:
        conn.execute(f"COMMIT PREPARED '{gid}'")
    else:
        conn.execute(f"ROLLBACK PREPARED '{gid}'")
        w.types, w.pairs = types, pairs


def batch_step(w: Writer, tx: _Tx) -> None:
    """A large transaction (streamed by the server past logical_decoding_work_mem): many
    soak_docs rows inserted, or many of them updated; then a pause."""
    rng = w.rng
    with _transaction(tx):
        if w.docs and rng.random() < 0.3:
            picked = rng.sample(sorted(w.docs), min(len(w.docs), rng.randrange(100, 2000)))
            for row_id in picked:  # a TRUNCATE of the other writer may have removed them
                v = w.v()
                cur = tx.conn.execute(
                    "UPDATE soak_docs SET v = %s, body = body || 'u' WHERE id = %s", (v, row_id)
                )
                if cur.rowcount == 1:
                    tx.log("soak_docs", str(row_id), v, "u")
                    w.docs[row_id] = v
                else:
                    del w.docs[row_id]
        else:
            rows = [(w.new_id(), w.v()) for _ in range(rng.randrange(500, 4000))]
            with tx.conn.cursor() as cur:
                cur.executemany("INSERT INTO soak_docs VALUES (%s, %s, repeat('b', 200))", rows)
            for row_id, v in rows:
                tx.log("soak_docs", str(row_id), v, "c")
                w.docs[row_id] = v
    w.pace(rng.uniform(2, 6))


def start_writers(dsn: str, seed: int) -> list[Writer]:
    return [
        Writer("oltp", 0, dsn, seed, oltp_step).start(),
        Writer("batch", 1, dsn, seed + 1, batch_step).start(),
    ]
