"""Pure decoders: replication payload bytes → immutable message objects.

One module per output plugin (`pgoutput`, `pglogical`), both producing the shared
message model of `bridge.decode.messages`. No I/O here.
"""
