"""Change events: relation cache, transactions, streamed and two-phase buffering.

Sits between the decoders and the schema stage: `EventAssembler.feed` turns decoded
messages (in WAL order) into one ordered stream of `TxBegin` / `Change` /
`TxCommit` / `LogicalMessageEvent`, whatever the plugin and however PostgreSQL
delivered each transaction.
"""

from bridge.events.assembler import Decode, EventAssembler
from bridge.events.model import (
    OP_CREATE,
    OP_DELETE,
    OP_MESSAGE,
    OP_TRUNCATE,
    OP_UPDATE,
    Change,
    Event,
    LogicalMessageEvent,
    TxBegin,
    TxCommit,
)
from bridge.events.relations import RelationCache
from bridge.events.spill import SpillPool

__all__ = [
    "OP_CREATE",
    "OP_DELETE",
    "OP_MESSAGE",
    "OP_TRUNCATE",
    "OP_UPDATE",
    "Change",
    "Decode",
    "Event",
    "EventAssembler",
    "LogicalMessageEvent",
    "RelationCache",
    "SpillPool",
    "TxBegin",
    "TxCommit",
]
