"""`avro.column_rules`: text values masked, truncated or hashed before they are written.

Debezium's `column.mask.with.N.chars` (N asterisks, whatever the value), and
`column.truncate.to.N.chars` (the first N characters), and
`column.mask.hash.<algorithm>.with.salt.<salt>` (the lowercase hex digest of the salt's
UTF-8 bytes followed by the value's: the scheme of Debezium's V2 hashing strategy). Only
columns with a rule get one: `bridge.encode.plan` wraps their converter, every other
column is encoded exactly as without rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from bridge.config import ColumnRule, hash_name
from bridge.encode.columns import Converter

Rewrite = Callable[[str], str]


def _one(rule: ColumnRule) -> Rewrite:
    if rule.action == "mask":
        masked = "*" * (rule.length or 0)
        return lambda _value: masked
    if rule.action == "truncate":
        length = rule.length or 0
        return lambda value: value[:length]
    assert rule.algorithm is not None  # ColumnRule requires it for hash
    algorithm, salt = hash_name(rule.algorithm), rule.salt.encode()

    def digest(value: str) -> str:
        h = hashlib.new(algorithm)
        h.update(salt)
        h.update(value.encode())
        return h.hexdigest()

    return digest


def rewritten(converter: Converter, rules: tuple[ColumnRule, ...]) -> Converter:
    """`converter` (wire bytes -> str) followed by every rule, in order."""
    steps = [_one(rule) for rule in rules]

    def convert(raw: bytes) -> str:
        value: str = converter(raw)
        for step in steps:
            value = step(value)
        return value

    return convert
