"""Settings, read from the environment.

With nothing set the portal runs on an embedded default: a SQLite file under ``var/`` and a
Celery broker on kombu's ``filesystem://`` transport (a real worker process, no server).
``DATABASE_URL=postgres://...`` and ``CELERY_BROKER_URL=redis://...`` move it onto
PostgreSQL (Django's psycopg pool) and Redis. ``PORTAL_MODE=production`` turns on the
deployment hardening that ``manage.py check --deploy`` asks for.
"""

import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from csp.constants import NONCE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", BASE_DIR / "var"))


def env_bool(name, default=False):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name, default=""):
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _test_name(path):
    name = unquote(path.lstrip("/")) or "postgres"
    return "test_vcportal" if name == "postgres" else f"test_{name}"


def database_from_url(url):
    """Turn ``postgres://user:pass@host:port/name?opt=v`` or ``sqlite:///path`` into a dict."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": unquote(parts.path) or ":memory:"}
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ImproperlyConfigured(f"DATABASE_URL scheme {parts.scheme!r} is not supported")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    pool_max = int(options.pop("pool_max", os.environ.get("DB_POOL_MAX", "8")))
    # ?prepare_threshold= (empty or "none") prepares nothing: behind pgbouncer in
    # transaction mode, where a prepared statement may land on another server connection.
    threshold = options.pop("prepare_threshold", "5").strip().lower()
    binding = options.pop("server_side_binding", "true").strip().lower()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        # Each database its own test database: parallel checkouts on one server don't collide.
        "TEST": {"NAME": os.environ.get("TEST_DATABASE_NAME") or _test_name(parts.path)},
        "OPTIONS": {
            # Django's built-in psycopg pool keeps connections warm.
            "pool": {"min_size": 1, "max_size": pool_max, "timeout": 10},
            # Values bound by the server: a statement's text is the same whatever its values,
            # so psycopg prepares it after prepare_threshold runs and PostgreSQL stops
            # planning it anew (the cluster list's query took longer to plan than to run).
            # With Django's default, client-side binding, nothing was ever prepared.
            "server_side_binding": binding not in {"0", "false", "no", "off"},
            "prepare_threshold": None if threshold in {"", "none"} else int(threshold),
            **options,
        },
    }


PRODUCTION = os.environ.get("PORTAL_MODE", "development") == "production"
DEBUG = env_bool("DEBUG", default=not PRODUCTION)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set in production mode")
    SECRET_KEY = "dev-only-insecure-key-0123456789-abcdefghijklmnopqrstuvwxyz-do-not-deploy"  # noqa: S105 - production refuses it (above)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "portal",
    "portal.catalog",
    "portal.compute",
    "portal.webhooks",
    "vms",
    "clusters",
    "metrics",
]
# No ``tests.*`` app, in either mode: the benchmark and load-test commands (the tests.bench
# app, Zulip's zilencer pattern) are installed by tests/settings.py and tests/bench/settings.py.

MIDDLEWARE = [
    "portal.web.middleware.RequestIdMiddleware",
    # Under /api/: NUL, body size and type refused before anything reads the body; every
    # error answered as problem+json (portal.api.guard).
    "portal.api.guard.ApiGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "portal.web.middleware.KoreanFirstLocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.web.middleware.CurrentProjectMiddleware",
    "portal.api.guard.ConsoleNulMiddleware",
    "portal.web.middleware.ConsoleErrorPageMiddleware",
    "portal.web.middleware.RuleViolationMiddleware",
]

ROOT_URLCONF = "portal.urls"
CSRF_FAILURE_VIEW = "portal.web.views.csrf_failure"
WSGI_APPLICATION = "portal.wsgi.application"
# Above an operation's limit (a field per VM checked, clusters.operations.internal.MAX_TARGETS):
# past that, the operation refuses in the user's language, not Django's cap with a bare 400.
DATA_UPLOAD_MAX_NUMBER_FIELDS = 2048

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.web.context_processors.console",
            ],
        },
    }
]

VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, worker, beat) share the file: wait for locks instead of failing.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    # Django's ModelBackend, refusing while the username or address is throttled: every way
    # in (the console's login, the admin's) goes through it (portal.iam.throttle).
    "portal.iam.throttle.ThrottledModelBackend",
    "portal.iam.auth.ProjectRoleBackend",
    "portal.iam.auth.ProjectStaffBackend",
]
# Login throttling: failures allowed per window, per username and per client address.
LOGIN_THROTTLE_PER_USER = int(os.environ.get("LOGIN_THROTTLE_PER_USER", "5"))
LOGIN_THROTTLE_PER_ADDRESS = int(os.environ.get("LOGIN_THROTTLE_PER_ADDRESS", "20"))
LOGIN_THROTTLE_WINDOW_SECONDS = int(os.environ.get("LOGIN_THROTTLE_WINDOW_SECONDS", "900"))
# Proxies we run in front of the portal: the client address is read this many hops from the
# right of X-Forwarded-For (0: REMOTE_ADDR, the header is not trusted).
TRUSTED_PROXY_COUNT = int(os.environ.get("TRUSTED_PROXY_COUNT", "0"))
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "clusters:cluster_list"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# Korean first: the language comes from the switcher's cookie only, never the browser.
LANGUAGE_CODE = "ko"
LANGUAGES = [("ko", "한국어"), ("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Dates Django formats itself (the admin) as the console writes them: 2026-12-07 23:06.
FORMAT_MODULE_PATH = ["portal.web.formats"]
LANGUAGE_COOKIE_NAME = "portal_language"
LANGUAGE_COOKIE_SAMESITE = "Lax"
TIME_ZONE = os.environ.get("TIME_ZONE", "Asia/Seoul")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
if not PRODUCTION:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on a missing folder
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Content-Security-Policy: our scripts carry a nonce; nothing comes from another origin.
# plotly.js writes inline styles, hence 'unsafe-inline' for styles only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "frame-ancestors": ["'none'"],
        "form-action": [SELF],
        "base-uri": [SELF],
        "object-src": ["'none'"],
    }
}

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = int(os.environ.get("SESSION_COOKIE_AGE", str(12 * 3600)))
CSRF_COOKIE_SAMESITE = "Lax"
# Our pages send the token from the template (hx-headers), never read the cookie from JS.
CSRF_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # __Host- cookies are HTTPS-only, host-only and path=/: a sibling subdomain cannot plant them.
    SESSION_COOKIE_NAME = "__Host-sessionid"
    CSRF_COOKIE_NAME = "__Host-csrftoken"
    LANGUAGE_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": os.environ["CACHE_URL"],
    }
    if os.environ.get("CACHE_URL")
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# Celery. The filesystem transport needs no server: the embedded default. All its folders
# (queue, processed, and the exchange tables it otherwise writes to ./control) live under
# var/celery; portal.foundation.broker makes them again if they go missing.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "filesystem://"
if CELERY_BROKER_URL == "filesystem://":
    _celery_dir = VAR_DIR / "celery"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_celery_dir / "queue"),
        "data_folder_out": str(_celery_dir / "queue"),
        "processed_folder": str(_celery_dir / "processed"),
        "control_folder": str(_celery_dir / "control"),
        "store_processed": False,
    }
    for _folder in ("queue", "processed", "control"):
        (_celery_dir / _folder).mkdir(parents=True, exist_ok=True)
else:
    # Tasks are acked late: a task a dead worker held comes back after this long.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = 120  # well below the broker's visibility timeout (600, above)
CELERY_TASK_SOFT_TIME_LIMIT = 100
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# The reconciler runs on a queue of its own, consumed by a worker of its own (`celery worker
# -Q reconcile`): a wedged main worker cannot hold back the repair, nor a slow repair the work.
RECONCILE_QUEUE = "reconcile"
# Webhook deliveries too (`celery worker -Q webhooks`): a receiver that hangs holds one of
# those workers for the read time-out, never a worker of the clusters' lifecycle.
WEBHOOK_QUEUE = "webhooks"
CELERY_TASK_ROUTES = {
    "clusters.tasks.reconcile": {"queue": RECONCILE_QUEUE},
    "portal.webhooks.tasks.*": {"queue": WEBHOOK_QUEUE},
}
RECONCILE_EVERY_SECONDS = float(os.environ.get("RECONCILE_EVERY_SECONDS", "30"))
# Every task a worker runs stamps a heartbeat, and beat queues one this often so an idle
# worker does too; /healthz answers 503 (and rundemo restarts the worker) past the max age.
WORKER_HEARTBEAT_SECONDS = float(os.environ.get("WORKER_HEARTBEAT_SECONDS", "10"))
# One beat at a time (portal.processes.beat_lock): how often a waiting beat tries the lock
# and the holder checks it still has it.
BEAT_LOCK_CHECK_SECONDS = float(os.environ.get("BEAT_LOCK_CHECK_SECONDS", "2"))
WORKER_HEARTBEAT_MAX_AGE_SECONDS = float(
    os.environ.get("WORKER_HEARTBEAT_MAX_AGE_SECONDS", str(6 * WORKER_HEARTBEAT_SECONDS))
)
CELERY_BEAT_SCHEDULE = {
    "reconcile": {
        "task": "clusters.tasks.reconcile",
        "schedule": RECONCILE_EVERY_SECONDS,
        "options": {"expires": RECONCILE_EVERY_SECONDS},  # a pass still queued at the next: dropped
    },
    "operations": {
        "task": "clusters.tasks.watch_stale",
        "schedule": RECONCILE_EVERY_SECONDS,
    },
    "worker-heartbeat": {
        "task": "portal.tasks.heartbeat",
        "schedule": WORKER_HEARTBEAT_SECONDS,
        "options": {"expires": WORKER_HEARTBEAT_SECONDS},
    },
    "metrics-rollup": {"task": "metrics.tasks.rollup", "schedule": 60.0},
    # Webhook retries (and first attempts whose message was lost) once they are due.
    "webhook-retries": {
        "task": "portal.webhooks.tasks.deliver_due",
        "schedule": 15.0,
        "options": {"expires": 15},
    },
    # A member whose agent went silent is 의심 within this much of the silence's limit.
    "vm-health": {
        "task": "vms.tasks.sweep_health",
        "schedule": 15.0,
        "options": {"expires": 15},
    },
    # A straggler (the 메트릭 tab's rule, over its minutes) is 의심; one no longer named, 정상.
    "vm-stragglers": {
        "task": "metrics.tasks.sweep_stragglers",
        "schedule": 60.0,
        "options": {"expires": 60},
    },
    # The cluster list's total sums a project's tally rows: merged each minute, they stay few.
    "cluster-tally": {"task": "clusters.tasks.merge_tally", "schedule": 60.0},
    "gpu-host-sync": {
        "task": "clusters.tasks.sync_gpu_hosts",
        "schedule": float(os.environ.get("LIBVIRT_SYNC_EVERY_SECONDS", "600")),
    },
    "metrics-storage": {"task": "metrics.tasks.maintain_storage", "schedule": 3600.0},
    "metrics-simulator": {
        "task": "metrics.tasks.emit_simulated_samples",
        "schedule": 10.0,
        "options": {"expires": 10},  # ticks don't pile up while no worker runs
    },
}

# The compute backend (docs/architecture.md#compute-backends) and its simulator's pace.
COMPUTE_BACKEND = os.environ.get(
    "COMPUTE_BACKEND", "portal.compute.backends.simulator.SimulatorBackend"
)
SIMULATOR_STEP_SECONDS = float(os.environ.get("SIMULATOR_STEP_SECONDS", "2"))
# Tests' hook into the simulator across processes (portal.compute.backends.simulator.StepGate): a
# folder where each step records that it started, and waits while the folder holds `closed`.
SIMULATOR_STEP_GATE = os.environ.get("SIMULATOR_STEP_GATE", "")
# 클러스터 검증 on a soft fabric (clusters.validation.baseline): a ring pair's ib_write_bw or the
# all-reduce below this percentage of the cluster's own baseline is 불량.
VALIDATION_BASELINE_PERCENT = float(os.environ.get("VALIDATION_BASELINE_PERCENT", "70"))
# Webhooks (docs/webhooks.md): a delivery's connect and read time-outs, how many attempts it
# gets, the wait after the first failed one (doubled after each), and whether private and
# loopback receivers are refused (production's default; link-local ones always are).
WEBHOOK_CONNECT_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_CONNECT_TIMEOUT_SECONDS", "3"))
WEBHOOK_READ_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_READ_TIMEOUT_SECONDS", "5"))
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("WEBHOOK_MAX_ATTEMPTS", "6"))
WEBHOOK_RETRY_BASE_SECONDS = float(os.environ.get("WEBHOOK_RETRY_BASE_SECONDS", "30"))
WEBHOOK_REFUSE_PRIVATE_ADDRESSES = env_bool("WEBHOOK_REFUSE_PRIVATE_ADDRESSES", PRODUCTION)
# A transitional status older than this is repaired by the reconciler.
TRANSITION_TIMEOUT_SECONDS = float(os.environ.get("TRANSITION_TIMEOUT_SECONDS", "120"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "portal.foundation.request_ids.RequestIdFilter"}},
    "formatters": {
        "structured": {
            "format": "%(asctime)s %(levelname)s %(name)s request_id=%(request_id)s %(message)s"
        }
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "structured",
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own console handler would print every request warning twice.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.db.backends": {"level": "WARNING"},
        "kombu.connection": {"level": "ERROR"},
    },
}

# The libvirt backend (COMPUTE_BACKEND=portal.compute.backends.libvirt.LibvirtBackend): kvm on GPU
# hosts, qemu (TCG) on machines without usable KVM; a host may override it.
LIBVIRT_DOMAIN_TYPE = os.environ.get("LIBVIRT_DOMAIN_TYPE", "kvm")
if LIBVIRT_DOMAIN_TYPE not in ("kvm", "qemu"):
    raise ImproperlyConfigured("LIBVIRT_DOMAIN_TYPE must be kvm or qemu")
# Names this portal's domains' and networks' UUIDs (uuid5 over it and the id): one per
# installation. The name prefix of its domains, networks and volumes (vc-vm-7, vc-fab-3): two
# portals sharing hosts need their own, or each would take the other's disks for its own.
LIBVIRT_PORTAL_ID = os.environ.get("LIBVIRT_PORTAL_ID", "vc-portal")
LIBVIRT_NAME_PREFIX = os.environ.get("LIBVIRT_NAME_PREFIX", "vc")
if not re.fullmatch(r"[a-z][a-z0-9]{0,11}", LIBVIRT_NAME_PREFIX):
    raise ImproperlyConfigured("LIBVIRT_NAME_PREFIX: 1-12 lowercase letters and digits")
# The portal as its guests reach it: an IPv4 address, the host's side of the management network.
LIBVIRT_PORTAL_URL = os.environ.get("LIBVIRT_PORTAL_URL", "http://10.0.2.2:8000")
# The guest's metrics agent as its NoCloud seed sets it up (guest.seed_files): how often it
# reports, in whole seconds, and what pip installs when the image has no agent (a requirement
# specifier, or a URL or path pip accepts; empty: the portal's own version,
# ``vc-metrics-agent==<version>``).
GUEST_AGENT_INTERVAL = int(os.environ.get("GUEST_AGENT_INTERVAL", "10"))
GUEST_AGENT_PIP_SPEC = os.environ.get("GUEST_AGENT_PIP_SPEC", "")
LIBVIRT_BASE_VOLUME = os.environ.get("LIBVIRT_BASE_VOLUME", "")
LIBVIRT_DISK_GIB = int(os.environ.get("LIBVIRT_DISK_GIB", "4"))
# Guests on hosts with emulated slots get this much instead of the instance type's size.
LIBVIRT_EMULATED_MEMORY_MIB = int(os.environ.get("LIBVIRT_EMULATED_MEMORY_MIB", "384"))
LIBVIRT_EMULATED_VCPUS = int(os.environ.get("LIBVIRT_EMULATED_VCPUS", "1"))
# The reconciler reads every host at once (at most this many threads), each within this long:
# a host that takes longer is skipped for the pass, as one that does not answer.
LIBVIRT_OBSERVE_THREADS = int(os.environ.get("LIBVIRT_OBSERVE_THREADS", "32"))
LIBVIRT_OBSERVE_SECONDS = float(os.environ.get("LIBVIRT_OBSERVE_SECONDS", "10"))
# A guest that ignores the ACPI shutdown this long is powered off.
LIBVIRT_SHUTDOWN_SECONDS = float(os.environ.get("LIBVIRT_SHUTDOWN_SECONDS", "20"))
# NVIDIA UFM (InfiniBand PKeys); empty: no subnet manager is programmed.
UFM_URL = os.environ.get("UFM_URL", "")
UFM_USER = os.environ.get("UFM_USER", "")
UFM_PASSWORD = os.environ.get("UFM_PASSWORD", "")
