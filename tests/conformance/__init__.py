"""PostgreSQL's own logical-replication tests replayed through the bridge (README.md here)."""
