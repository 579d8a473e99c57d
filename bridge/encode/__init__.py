"""Change events -> Confluent-framed Avro bytes: the one compiled encoder per table version.

`records` (ChangeEncoder, TxSource) writes Debezium's record shapes; `plan` is the per-row
loop over a table version's columns; `columns` turns each column's declared wire shape
(`bridge.schema.pgtypes.Wire`) into value converters (`textvalues`, `binvalues`, `arrays`,
`ranges`, `render`, on `temporal`'s calendar arithmetic); `avro` writes Avro binary.
Above `bridge.schema` (pure type -> Avro schema mapping), below the wiring layer
(`bridge.encoders`, `bridge.pipeline`), which builds encoders with registry I/O.
"""
