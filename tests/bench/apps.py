from django.apps import AppConfig


class BenchConfig(AppConfig):
    """The benchmark and load-test commands: a development-only app (Zulip's ``zilencer``),
    installed by the development and test settings, never by production ones."""

    name = "tests.bench"
    label = "bench"
    verbose_name = "Benchmarks (development only)"
