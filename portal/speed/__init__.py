"""The portal's speed mechanisms, each kept because a benchmark showed what it buys
(docs/speed.md): compiled statements (``statements``), per-process stores (``kept``) and
psycopg's C ``timestamptz`` loader on UTC connections (``pgtime``)."""
