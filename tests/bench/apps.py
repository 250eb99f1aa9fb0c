from django.apps import AppConfig


class BenchConfig(AppConfig):
    """The benchmark and load-test commands: a development-only app (Zulip's ``zilencer``),
    installed by tests/settings.py and tests/bench/settings.py, never by portal/settings.py."""

    name = "tests.bench"
    label = "bench"
    verbose_name = "Benchmarks (development only)"
