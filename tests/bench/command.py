"""What every benchmark command shares: PostgreSQL only, DEBUG off (it keeps every query in
memory), a scratch database of its own (``--keep`` keeps it), its lines flushed as they come
and its total time at the end. A command adds its options, refuses its bad ones
(``refusal``), enters what its run needs besides the database (``around``) and measures in
``run_bench``."""

import time
from contextlib import AbstractContextManager, nullcontext

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from tests.bench.scratch import scratch_database


class BenchCommand(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")

    def refusal(self, opts) -> str:
        """Why these options cannot give a figure ('' if they can)."""
        return ""

    def around(self) -> AbstractContextManager:
        """What the run needs besides its database (settings, a folder, a broker)."""
        return nullcontext()

    def run_bench(self):
        raise NotImplementedError

    def handle(self, *args, **opts):
        name = self.__module__.rpartition(".")[2]
        if connection.vendor != "postgresql":
            raise CommandError(f"{name} measures PostgreSQL: set DATABASE_URL=postgres://...")
        if settings.DEBUG:
            raise CommandError("run with DEBUG=0: DEBUG keeps every query in memory")
        if refusal := self.refusal(opts):
            raise CommandError(refusal)
        self.opts = opts
        started = time.perf_counter()
        with scratch_database(keep=opts["keep"], say=self.say), self.around():
            self.run_bench()
        self.say(f"total {time.perf_counter() - started:.0f} s")

    def say(self, text=""):
        self.stdout.write(text)
        self.stdout.flush()
