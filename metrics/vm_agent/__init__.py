"""The metrics agent that runs on a member VM, a distribution of its own (``pyproject.toml``
here: ``vc-metrics-agent``, importable as ``vc_metrics_agent``, console script
``vc-metrics-agent``). The portal imports the same modules as ``metrics.vm_agent`` — the
tool parsers of 클러스터 검증 (``toolparse``) are shared — so the modules import each other
relatively and depend on nothing but the standard library and psutil."""

# The release's one version: this distribution's (pyproject.toml here reads it), the portal's
# (the top pyproject.toml reads it from here too), what the agent reports in its User-Agent,
# and what a guest installs (``GUEST_AGENT_PIP_SPEC``'s default pins it). A guest's agent is
# the portal's own build, so a difference shown on the VM page means an agent left behind.
VERSION = "0.1.0"
__version__ = VERSION
