"""metrics' endpoints: the console's pages (``pages``), the agents' ingest (``agent``) and
the agents' job API (``jobs``)."""
