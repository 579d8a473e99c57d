"""Snapshots: the rows that exist before streaming starts, and re-reads while it runs.

Initial snapshot (`initial`, `SnapshotManager.run_initial`): read inside the
snapshot the slot exported when it was created, then START_REPLICATION from the
slot's consistent point: the snapshot sees exactly the transactions committed
before that point and the stream every one after it, so nothing is lost or doubled
at the seam. Records are op "r" with `source.snapshot` "true" ("last" on the very
last one), through the same encoders, producer and delivery tracking as streaming.

Chunks and resumes (`chunks`, `store`): tables are read in key ranges planned by
walking the primary key (ctid block ranges without a key), by N reader threads
that all imported the one exported snapshot. A chunk is recorded as done only after
Kafka confirmed all its records. The exported snapshot dies with the process, so a
restart reads the unfinished chunks at a newer snapshot (L), taken from a temporary
slot: streaming starts first, from the slot's position, delivers the changes
committed before L, and only then are the chunks read, so every key keeps commit
order in its topic, across any number of restarts (see `modes`). Key ranges mean
the same rows at any snapshot. Ctid ranges do not: after a resume, a keyless
table's row moved by an update since the crash can be read twice, or only through
the update's streamed event.

Incremental snapshots (`incremental`): signalled through a table or a Kafka topic
(`signals`), read chunk by chunk between watermarks while streaming continues: rows of
the signal table, or with `snapshot.read_only` the chunk read's own transaction snapshot
(`watermarks`), its runs then kept in the state topic (`runstate`).

Notifications (`notify`): the progress of both kinds, to `snapshot.notification_topic`.

Modes: see `modes`.

Nothing is imported here: a snapshot reader process imports only what it runs
(`worker`), not the streaming side's modules.
"""
