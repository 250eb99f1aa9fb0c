"""The ingest API's work on an agent's batch: authenticate, bound, validate and store it
(``batch``), with the column checks host samples and device rows share (``checks``) and the
per-GPU and per-port rows (``devices``)."""
