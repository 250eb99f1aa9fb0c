from django.urls import path

from metrics import federate, views

app_name = "metrics"
urlpatterns = [
    path("api/metrics/ingest", views.ingest_samples, name="ingest"),
    path("api/metrics/check", views.ingest_check, name="ingest_check"),
    path("vms/<int:pk>/metrics/token/", views.vm_token_rotate, name="vm_token_rotate"),
    path("clusters/<int:pk>/metrics/charts/", views.cluster_charts, name="cluster_charts"),
    path("metrics/federate/", federate.federate, name="federate"),
]
