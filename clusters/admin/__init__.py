"""The clusters app's admin: clusters and operations (``clusters``), GPU hosts
(``hosts``). Importing the package registers both."""

from clusters.admin import clusters, hosts

__all__ = ["clusters", "hosts"]
