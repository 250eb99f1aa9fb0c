from django.urls import path

from metrics import federate
from metrics.views import agent, cluster, jobs
from metrics.views import pages as views

app_name = "metrics"
urlpatterns = [
    path("api/metrics/ingest", agent.ingest_samples, name="ingest"),
    path("api/metrics/check", agent.ingest_check, name="ingest_check"),
    # The agents' job API (클러스터 검증): a bearer token like ingest, hence the names.
    path("api/metrics/jobs/next", jobs.next_jobs, name="ingest_jobs_next"),
    path("api/metrics/jobs/result", jobs.job_result, name="ingest_job_result"),
    # What a member knows of its cluster, and the guest's SSH host keys (the same token).
    path("api/metrics/cluster", cluster.cluster_view, name="ingest_cluster"),
    path("api/metrics/host-keys", cluster.report_host_keys, name="ingest_host_keys"),
    # What the endpoints above take and answer, refusals included (metrics.openapi).
    path("api/metrics/openapi.json", agent.agent_openapi, name="agent_openapi"),
    path("vms/<int:pk>/metrics/token/", views.vm_token_rotate, name="vm_token_rotate"),
    path("clusters/<int:pk>/metrics/charts/", views.cluster_charts, name="cluster_charts"),
    path("clusters/<int:pk>/metrics/devices/", views.cluster_devices, name="cluster_devices"),
]
# Prometheus federation is opt-in: routed once an operator configures who may scrape
# (METRICS_SCRAPE_TOKENS, or another METRICS_SCRAPE_AUTH function). metrics/README.md.
if federate.enabled():
    urlpatterns.append(path("metrics/federate/", federate.federate, name="federate"))
