"""The replication source: connection, slot and publication set-up, the COPY BOTH stream.

`libpq` is the only module that touches psycopg's low-level connection; `envelope`
and `status` are pure protocol logic; `stream` wires them.
"""
