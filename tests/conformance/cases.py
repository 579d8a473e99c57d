"""PostgreSQL's own replication tests, transcribed as data, read into steps.

A case file (`subscription/*.sql`, `test_decoding/*.sql`) holds the publisher-side SQL of
one upstream file in the upstream order, with the upstream path and commit at its top.
Lines starting with `--!` are directives; every other line is SQL (plain `--` comments are
ignored). The statements between two directives run one at a time, each in autocommit as
psql runs a script (so `BEGIN` ... `COMMIT` and `PREPARE TRANSACTION` mean what they mean
there), on the current session.

A psql `\\copy TABLE FROM STDIN` line takes the lines after it, up to `\\.`, as its data.

Directives, one per line:

    --! bridge NAME [option=value ...] [later]  a bridge follows publication NAME (before
                                                start; `publication=P`: it follows P, NAME
                                                only names the bridge; other options are
                                                source settings, e.g. streaming=on; `later`:
                                                it starts at its own `start NAME`)
    --! requires MAJOR                          the case needs PostgreSQL MAJOR or newer
    --! if MAJOR / --! else / --! endif         the lines between run on MAJOR or newer only
    --! start                                   start the bridges (the TAP's CREATE
                                                SUBSCRIPTION: what exists is snapshotted)
    --! start NAME / --! stop NAME             start a `later` bridge (its initial
                                                snapshot then), or stop one for good (the
                                                TAP drops its subscription)
    --! check                                   the TAP waits for catch-up: compare
    --! session NAME [database=DB]              the next statements run on session NAME
                                                (on database DB instead of the case's)
    --! error                                   the next statement fails (the TAP checks
                                                that PostgreSQL refuses it)
    --! restart                                 stop the bridges and start them again
    --! diverges TABLE: WHY                     from here on PostgreSQL does not send all of
                                                TABLE's changes (WHY): its rows are no longer
                                                compared with the table, only by `expect`
    --! converges TABLE                         compared with the table again
    --! locked TABLE: WHY                       the next check does not read TABLE (a
                                                prepared transaction holds it under an
                                                exclusive lock no reader passes before
                                                COMMIT PREPARED); the check still waits
                                                for the bridge to deliver past it
    --! expect TABLE: QUERY => ROW[; ROW]       the TAP's own check on the rebuilt topic: QUERY
                                                runs over a table TABLE holding the rows a
                                                consumer of its topic holds, each row printed
                                                as psql -At prints it (columns joined by |;
                                                "(none)" for no rows)

    --! messages PREFIX => CONTENT[; CONTENT]    the logical decoding messages of PREFIX in the
                                                bridge's message topic, in order (committed
                                                transactional ones and every
                                                non-transactional one)

TABLE is `name` or `schema.name`; `name@BRIDGE` limits a `diverges`, `converges` or
`expect` to that bridge.
    --! resync BRIDGE TABLE [TABLE ...]        the bridge's incremental snapshot of the
                                                tables, waited for (the TAP's REFRESH
                                                PUBLICATION copies a table added since)

Nothing here runs SQL: `bridge`-free, so the loader's unit tests run anywhere.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
# PostgreSQL's own files; `local` holds the cases written here for what they do not show
# (docs/concepts/partitions.md's ATTACH and DETACH), headed "-- local: WHAT" instead.
SUITES: Final = ("subscription", "test_decoding", "local")
_HEADER: Final = re.compile(
    r"^-- (?:postgres/postgres (?P<path>\S+)\n-- commit (?P<commit>[0-9a-f]{40})"
    r"|local: (?P<local>.+))\n"
)


@dataclass(frozen=True)
class Sql:
    session: str  # a session name, or "name@database" for one on another database
    text: str
    line: int
    fails: bool = False  # PostgreSQL refuses it (the TAP's checked error)
    copy: str | None = None  # COPY ... FROM STDIN: its data, as psql's \copy reads it


@dataclass(frozen=True)
class Start:
    line: int
    bridge: str | None = None  # None: every bridge not declared `later`


@dataclass(frozen=True)
class Stop:
    line: int
    bridge: str


@dataclass(frozen=True)
class Expect:
    table: str  # name@publication or name
    query: str
    rows: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Messages:
    prefix: str
    contents: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Check:
    line: int
    expects: tuple[Expect, ...] = ()
    messages: tuple[Messages, ...] = ()
    diverged: frozenset[str] = frozenset()  # name@publication or name
    locked: frozenset[str] = frozenset()  # not readable at this check: name or schema.name

    def diverges(self, label: str, bridge: str) -> bool:
        """Whether `label` (schema.table) is not compared on the bridge named `bridge`."""
        unread = self.diverged | self.locked
        return bool({f"{label}", f"{label}@{bridge}"} & {qualified(t) for t in unread})

    def expectations(self, bridge: str) -> list[tuple[str, Expect]]:
        """(schema.table, expect) of this check on the bridge named `bridge`."""
        out = []
        for e in self.expects:
            table, _, only = e.table.partition("@")
            if not only or only == bridge:
                out.append((qualified(table), e))
        return out


def qualified(table: str) -> str:
    """`name` -> `public.name`; `schema.name` and `name@publication` kept as they are."""
    name, at, publication = table.partition("@")
    return (name if "." in name else f"public.{name}") + at + publication


@dataclass(frozen=True)
class Restart:
    line: int


@dataclass(frozen=True)
class Resync:
    bridge: str
    tables: tuple[str, ...]  # schema.table
    line: int


Step = Sql | Start | Stop | Check | Restart | Resync


@dataclass(frozen=True)
class BridgeSpec:
    name: str  # the publication, unless `publication=` names another
    publication: str
    options: dict[str, str] = field(default_factory=dict)
    later: bool = False  # started by its own `start NAME`


@dataclass
class Case:
    name: str  # e.g. "subscription/001_rep_changes"
    upstream: str  # "" for a local case
    commit: str
    requires: int
    bridges: list[BridgeSpec]
    steps: list[Step]


class CaseError(ValueError):
    """A case file that does not follow the format above."""


def case_files() -> list[Path]:
    return sorted(p for suite in SUITES for p in (HERE / suite).glob("*.sql"))


def case_name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def load(path: Path, major: int) -> Case:
    """The case of `path` as it runs on PostgreSQL `major`."""
    text = path.read_text()
    head = _HEADER.match(text)
    if head is None:
        raise CaseError(f"{path}: the first two lines name the upstream path and commit")
    upstream, commit = (head["path"], head["commit"]) if head["path"] else ("", "")
    case = Case(case_name(path), upstream, commit, 0, [], [])
    session = "main"
    started = False
    diverged: set[str] = set()
    expects: list[Expect] = []
    messages: list[Messages] = []
    locked: set[str] = set()
    active = [True]  # the `if` blocks' states, innermost last
    chunk: list[str] = []
    chunk_line = 0

    fails = False

    def flush() -> None:
        nonlocal chunk, fails
        if chunk and all(active):
            for line, statement in split_statements("\n".join(chunk), chunk_line):
                case.steps.append(Sql(session, statement, line, fails))
                fails = False
        chunk = []

    copying: list[str] | None = None
    copy_line = 0
    for number, line in enumerate(text.splitlines(), 1):
        if copying is not None:
            if line == "\\.":
                if all(active):
                    command = copying[0]
                    data = "".join(f"{row}\n" for row in copying[1:])
                    case.steps.append(Sql(session, command, copy_line, copy=data))
                copying = None
            else:
                copying.append(line)
            continue
        if line.startswith("\\copy "):
            flush()
            copying, copy_line = ["COPY " + line.removeprefix("\\copy ")], number
            chunk_line = number + 1
            continue
        if not line.startswith("--!"):
            if not chunk:
                chunk_line = number
            chunk.append(line)
            continue
        flush()
        chunk_line = number + 1
        word, _, rest = line[3:].strip().partition(" ")
        rest = rest.strip()
        where = f"{path.name}:{number}"
        if word == "if":
            active.append(major >= _major(rest, where))
            continue
        if word == "else":
            if len(active) == 1:
                raise CaseError(f"{where}: else without if")
            active[-1] = not active[-1]
            continue
        if word == "endif":
            if len(active) == 1:
                raise CaseError(f"{where}: endif without if")
            active.pop()
            continue
        if not all(active):
            continue
        if word == "requires":
            case.requires = _major(rest, where)
        elif word == "bridge":
            if started:
                raise CaseError(f"{where}: bridges are declared before start")
            name, *options = shlex.split(rest)
            later = "later" in options
            pairs = dict(o.split("=", 1) for o in options if o != "later")
            publication = pairs.pop("publication", name)
            if any(b.name == name for b in case.bridges):
                raise CaseError(f"{where}: a second bridge named {name}")
            case.bridges.append(BridgeSpec(name, publication, pairs, later))
        elif word == "start" and rest:
            _need_started(started, where)
            case.steps.append(Start(number, rest))
        elif word == "start":
            if started:
                raise CaseError(f"{where}: a second start")
            started = True
            case.steps.append(Start(number))
        elif word == "stop":
            _need_started(started, where)
            case.steps.append(Stop(number, rest))
        elif word == "check":
            _need_started(started, where)
            case.steps.append(
                Check(
                    number,
                    tuple(expects),
                    tuple(messages),
                    frozenset(diverged),
                    frozenset(locked),
                )
            )
            expects, messages, locked = [], [], set()
        elif word == "session":
            name, _, database = rest.partition(" database=")
            session = f"{name.strip()}@{database.strip()}" if database else name.strip()
        elif word == "error":
            fails = True
        elif word == "restart":
            _need_started(started, where)
            case.steps.append(Restart(number))
        elif word == "resync":
            _need_started(started, where)
            bridge, *tables = rest.split()
            if not tables:
                raise CaseError(f"{where}: resync BRIDGE TABLE [TABLE ...]")
            names = tuple(qualified(t) for t in tables)
            case.steps.append(Resync(bridge, names, number))
        elif word == "diverges":
            table, colon, why = rest.partition(":")
            if not colon or not why.strip():
                raise CaseError(f"{where}: diverges TABLE: WHY")
            diverged.add(table.strip())
        elif word == "locked":
            table, colon, why = rest.partition(":")
            if not colon or not why.strip():
                raise CaseError(f"{where}: locked TABLE: WHY")
            locked.add(table.strip())
        elif word == "converges":
            diverged.discard(rest.strip())
        elif word == "expect":
            expects.append(_expect(rest, number, where))
        elif word == "messages":
            prefix, arrow, contents = rest.partition(" => ")
            if not arrow:
                raise CaseError(f"{where}: messages PREFIX => CONTENT[; CONTENT]")
            found = (
                ()
                if contents.strip() == "(none)"
                else tuple(c.strip() for c in contents.split(";"))
            )
            messages.append(Messages(prefix.strip(), found, number))
        else:
            raise CaseError(f"{where}: unknown directive {word!r}")
    flush()
    if copying is not None:
        raise CaseError(f"{path.name}:{copy_line}: \\copy data without its closing \\.")
    if len(active) != 1:
        raise CaseError(f"{path.name}: an if without endif")
    if not case.bridges or not started:
        raise CaseError(f"{path.name}: a case declares a bridge and starts it")
    if expects or messages or locked:
        raise CaseError(f"{path.name}: expect, messages or locked lines after the last check")
    return case


def _expect(rest: str, number: int, where: str) -> Expect:
    table, colon, body = rest.partition(":")
    query, arrow, rows = body.rpartition(" => ")
    if not colon or not arrow:
        raise CaseError(f"{where}: expect TABLE: QUERY => ROW[; ROW]")
    found = tuple(r.strip() for r in rows.split(";")) if rows.strip() != "(none)" else ()
    return Expect(table.strip(), query.strip(), found, number)


def _major(text: str, where: str) -> int:
    if not text.isdigit():
        raise CaseError(f"{where}: a PostgreSQL major version, e.g. 16")
    return int(text)


def _need_started(started: bool, where: str) -> None:
    if not started:
        raise CaseError(f"{where}: only after start")


def split_statements(text: str, first_line: int = 1) -> Iterator[tuple[int, str]]:
    """(line, statement) of each SQL statement in `text`, without its `;`: quotes ('..',
    E'..', "..", $tag$..$tag$) and comments (--, /* */) are skipped over when looking for
    the `;` that ends a statement."""
    i, n = 0, len(text)
    start = 0
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == "'":
            escapes = i > 0 and text[i - 1] in "eE" and (i < 2 or not text[i - 2].isalnum())
            i = _string_end(text, i + 1, escapes)
        elif c == '"':
            end = text.find('"', i + 1)
            i = n if end < 0 else end + 1
        elif c == "$" and (m := re.match(r"\$([A-Za-z_]\w*)?\$", text[i:])):
            tag = m.group(0)
            end = text.find(tag, i + len(tag))
            i = n if end < 0 else end + len(tag)
        elif c == ";":
            yield from _statement(text, start, i, first_line)
            i += 1
            start = i
        else:
            i += 1
    yield from _statement(text, start, n, first_line)


def _string_end(text: str, i: int, escapes: bool) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if escapes and c == "\\":
            i += 2
        elif c == "'":
            if text.startswith("''", i):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return n


def _statement(text: str, start: int, end: int, first_line: int) -> Iterator[tuple[int, str]]:
    body = text[start:end]
    code = [
        line for line in body.splitlines() if line.strip() and not line.strip().startswith("--")
    ]
    if code:  # comments travel with the statement that follows them; PostgreSQL skips them
        offset = body.index(code[0])
        yield first_line + text.count("\n", 0, start + offset), body.strip()
