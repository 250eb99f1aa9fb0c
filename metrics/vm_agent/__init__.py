"""The metrics agent that runs on a member VM, a distribution of its own (``pyproject.toml``
here: ``vc-metrics-agent``, importable as ``vc_metrics_agent``, console script
``vc-metrics-agent``). The portal imports the same modules as ``metrics.vm_agent`` — the
tool parsers of 클러스터 검증 (``toolparse``) are shared — so the modules import each other
relatively and depend on nothing but the standard library and psutil."""
