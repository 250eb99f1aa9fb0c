"""The processes around the web server: the worker's heartbeat (proof that it consumes) and the
supervisor that keeps the demo's worker, beat and helpers running."""
