"""Serve plotly.js from the installed plotly package as ``metrics/plotly.min.js``.

plotly (a dependency already) ships the matching plotly.js; copying its 4.8 MB into the repo
would duplicate it and let the two drift. ``collectstatic`` and whitenoise's finder mode
both go through this finder, so the file is served locally (no CDN, CSP 'self').
"""

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PACKAGE_DATA = Path(plotly.__file__).resolve().parent / "package_data"
FILE_NAME = "plotly.min.js"
PREFIX = "metrics"
STATIC_PATH = f"{PREFIX}/{FILE_NAME}"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=PACKAGE_DATA)
        self.storage.prefix = PREFIX  # collectstatic puts the file under metrics/

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != STATIC_PATH:
            return [] if find_all else None
        found = str(PACKAGE_DATA / FILE_NAME)
        return [found] if find_all else found

    def list(self, ignore_patterns):
        yield FILE_NAME, self.storage
