"""The data path's layers run one way, read from the imports of bridge/ (no import runs).

    base (errors, lsn, log, config, hosts, record: importable by all)
    source < decode < events < schema < encode < kafka < wiring

`kafka` is the Kafka side (bridge/kafka/: producer, acknowledgement watermark,
exactly-once, topics, side topics, oversized records, schema registry): it sees the
encoder's records, never the wiring that runs it.

A module may import its own layer, a lower one, or a base module; never a higher one.
`spark` (the consumer side) is separate: it imports only base modules, and only the
demo and verify's lake check and Spark variant (wiring) import it. Between packages (and
top-level modules) there is no import cycle, whichever direction, and none between files
either: two modules that need each other are one concept split in the wrong place.

Every import counts: module level, inside functions, and under TYPE_CHECKING (a
type-only import still ties the two layers together).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

BRIDGE = Path(__file__).resolve().parents[1] / "bridge"

BASE = "base"
LAYERS = ["source", "decode", "events", "schema", "encode", "kafka", "wiring"]
SPARK = "spark"
# wiring modules that run the consumer side: the demo, verify against a Delta table, and
# verify in Spark jobs
SPARK_USERS = {
    "bridge.demo",
    "bridge.verify.distributed",
    "bridge.verify.lake",
    "bridge.verify.run",
}

_PACKAGES = {
    "source": "source",
    "decode": "decode",
    "events": "events",
    "schema": "schema",
    "encode": "encode",
    "kafka": "kafka",
    "snapshot": "wiring",
    "verify": "wiring",
    "spark": SPARK,
}
_MODULES = {
    **dict.fromkeys(
        ["__init__", "__main__", "errors", "lsn", "log", "config", "hosts", "record"], BASE
    ),
    **dict.fromkeys(
        [
            "routing",
            "outbox",  # outbox.*: outbox table changes -> routed events
            "encoders",  # EncoderCache: catalog SQL, registry I/O, reads Config
            "plugins",
            "metrics",
            "http",
            "check",
            "pipeline",
            "build",
            # the slot position recorded in Kafka, lost slots recognised: wiring, not
            # kafka, as it also reads and drops the slot on the replication connection
            "slotstate",
            "reselect",  # avro.toast_reselect: a SELECT completing a decoded change
            "renames",  # a relation's name PostgreSQL 15 did not send: catalog SQL
            "standby",  # ha.enabled: the slot's lease, standing by, taking over
            "cli",
            "debezium_import",  # bridge import-debezium: connector properties -> Config
            "demo",
        ],
        "wiring",
    ),
}
# `bridge.__main__` is the `python -m bridge` entry point: the top of everything.
_ENTRY_POINTS = {"bridge.__main__"}

# Known violations, each with its reason. An entry that no longer occurs is reported, not
# failed.
ALLOWED: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(BRIDGE.rglob("*.py")):
        parts = path.relative_to(BRIDGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def unit(module: str) -> str:
    """The package (bridge.schema) or top-level module (bridge.pipeline) `module` is in."""
    return ".".join(module.split(".")[:2])


def layer(module: str) -> str:
    if module == "bridge" or module in _ENTRY_POINTS:
        return BASE if module == "bridge" else "entry"
    top = module.split(".")[1]
    found = _PACKAGES.get(top) if (BRIDGE / top).is_dir() else _MODULES.get(top)
    if found is None:
        pytest.fail(f"{module} has no layer: add it to tests/test_layers.py")
    return found


def rank(name: str) -> int:
    return LAYERS.index(name) if name in LAYERS else len(LAYERS)


def imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The bridge modules `module` imports (`from bridge.x import y` counts bridge.x.y when
    that is a module, and bridge.x itself only when some name is not: for a submodule it is
    run first anyway, its contents not needed)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
            if not all(name in known for name in names):
                names.append(base)
        else:
            continue
        for name in names:
            if name in known and name != module:
                yield name


def edges() -> list[tuple[str, str]]:
    known = modules()
    return sorted({(m, t) for m, p in known.items() for t in imports(m, p, known)})


def allowed(source: str, target: str) -> bool:
    """Whether `source` may import `target`."""
    a, b = layer(source), layer(target)
    if a == "entry" or b == BASE:
        return True
    if b == "entry":
        return False
    if a == SPARK or b == SPARK:
        return a == b or (b == SPARK and source in SPARK_USERS)
    return (a == BASE and b == BASE) or (a != BASE and rank(b) <= rank(a))


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer(module)


def test_layers_run_one_way() -> None:
    wrong = [
        f"{s} ({layer(s)}) imports {t} ({layer(t)})"
        for s, t in edges()
        if not allowed(s, t) and (s, t) not in ALLOWED
    ]
    assert not wrong, "imports running up a layer:\n" + "\n".join(wrong)


def test_allow_list_entries_still_occur() -> None:
    stale = ALLOWED - set(edges())
    if stale:
        pytest.skip(f"no longer needed in ALLOWED (remove them): {sorted(stale)}")


def test_no_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for source, target in edges():
        if unit(source) != unit(target) and (source, target) not in ALLOWED:
            graph.setdefault(unit(source), set()).add(unit(target))
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])


def test_no_cycle_between_files() -> None:
    """Module by module, inside a package too."""
    graph: dict[str, set[str]] = {}
    for source, target in edges():
        if (source, target) not in ALLOWED:
            graph.setdefault(source, set()).add(target)
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle between files: " + " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt)
            if found is not None:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start)
        if found is not None:
            return found
    return None


# Modules that decide without doing I/O (unit-tested without servers): the decoders, the
# change events, the type mapping, the encoders, when to send a status update, and the
# incremental snapshot's window state machine (its I/O shell is snapshot/incremental.py).
PURE = ("bridge.decode", "bridge.events", "bridge.schema", "bridge.encode")
PURE_MODULES = {"bridge.source.status", "bridge.snapshot.windows"}
# what talks to a server, a socket or another process (or thread)
IO_LIBRARIES = {
    "confluent_kafka",
    "multiprocessing",
    "psycopg",
    "select",
    "selectors",
    "socket",
    "subprocess",
    "threading",
}


def test_pure_modules_import_no_io() -> None:
    """By their own imports: a pure module may still name a type from an I/O module of the
    bridge (windows.py takes `chunks.Bound`), but it calls no client, socket or process."""
    wrong = []
    for module, path in modules().items():
        if module in PURE_MODULES or module.startswith(tuple(p + "." for p in PURE)):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                else:
                    continue
                wrong += [f"{module} imports {n}" for n in names if n.split(".")[0] in IO_LIBRARIES]
    assert not wrong, "I/O in a pure module:\n" + "\n".join(wrong)


def test_the_checker_sees_a_violation() -> None:
    """The rule itself: upward, sideways into spark, and base importing up are refused."""
    assert allowed("bridge.events.assembler", "bridge.decode.messages")
    assert allowed("bridge.schema.table", "bridge.config")
    assert not allowed("bridge.source.status", "bridge.decode.messages")
    assert not allowed("bridge.decode.pgoutput", "bridge.events.model")
    assert not allowed("bridge.kafka.producer", "bridge.pipeline")
    assert not allowed("bridge.config", "bridge.kafka.producer")
    assert not allowed("bridge.encode.records", "bridge.kafka.producer")
    assert not allowed("bridge.kafka.oversized", "bridge.metrics")
    assert allowed("bridge.kafka.sidetopics", "bridge.encode.records")
    assert allowed("bridge.pipeline", "bridge.kafka.acks")
    assert not allowed("bridge.pipeline", "bridge.spark.reader")
    assert not allowed("bridge.spark.reader", "bridge.schema.avronames")
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
