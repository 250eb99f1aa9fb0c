import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()

# Everything imported so far lives as long as the process: move it out of the collector's
# reach, so a full collection (docs/performance.md, 2026-11-29) has less to scan.
gc.collect()
gc.freeze()
