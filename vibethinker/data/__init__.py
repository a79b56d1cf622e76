"""Data: Problem records on disk (io), the embedded procedural world (world/)."""
