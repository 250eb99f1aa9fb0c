from django.urls import path

from clusters.views import clusters as views
from clusters.views import help as views_help
from clusters.views import keys as views_keys
from clusters.views import members as views_members
from clusters.views import rename as views_rename
from clusters.views import spares as views_spares
from clusters.views import validation as views_validation

app_name = "clusters"
urlpatterns = [
    path("", views.cluster_list, name="cluster_list"),
    path("help/", views_help.help_page, name="help"),
    path("help/infiniband/", views_help.infiniband_page, name="infiniband_help"),
    path("<int:pk>/infiniband/", views_help.infiniband_page, name="cluster_infiniband"),
    path("new/", views.cluster_create, name="cluster_create"),
    path("new/options/", views.cluster_form_options, name="cluster_form_options"),
    path("<int:pk>/", views.cluster_tab, {"tab": "info"}, name="cluster_detail"),
    path("<int:pk>/vms/", views.cluster_tab, {"tab": "members"}, name="cluster_members"),
    path("<int:pk>/metrics/", views.cluster_tab, {"tab": "metrics"}, name="cluster_metrics"),
    path("<int:pk>/activity/", views.cluster_tab, {"tab": "activity"}, name="cluster_activity"),
    path("<int:pk>/header/", views.cluster_header, name="cluster_header"),
    path("<int:pk>/hostfile/", views.cluster_hostfile, name="cluster_hostfile"),
    path("<int:pk>/start/", views.cluster_start, name="cluster_start"),
    path("<int:pk>/stop/", views.cluster_stop, name="cluster_stop"),
    path("<int:pk>/dismiss/", views.cluster_dismiss, name="cluster_dismiss"),
    path("<int:pk>/delete/", views.cluster_delete, name="cluster_delete"),
    path("<int:pk>/rename/", views_rename.cluster_rename, name="cluster_rename"),
    path("<int:pk>/ssh-keys/", views_keys.cluster_ssh_keys, name="cluster_ssh_keys"),
    path("<int:pk>/attach/", views_members.cluster_attach, name="cluster_attach"),
    path("<int:pk>/detach/", views_members.cluster_detach, name="cluster_detach"),
    path(
        "<int:pk>/members/start/",
        views_members.cluster_start_members,
        name="cluster_start_members",
    ),
    path("<int:pk>/members/stop/", views_members.cluster_stop_members, name="cluster_stop_members"),
    path("operations/<int:pk>/", views_members.operation_detail, name="operation_detail"),
    path("operations/<int:pk>/cancel/", views_members.operation_cancel, name="operation_cancel"),
    path("<int:pk>/validation/", views_validation.validation_section, name="validation_section"),
    path("<int:pk>/validation/start/", views_validation.validation_start, name="validation_start"),
    path("<int:pk>/validation/raw/", views_validation.validation_raw, name="validation_raw"),
    path("<int:pk>/replace/", views_validation.member_replace, name="member_replace"),
    path("<int:pk>/spares/", views_spares.spares_section, name="cluster_spares"),
    path("<int:pk>/spares/add/", views_spares.spare_add, name="cluster_spare_add"),
    path("<int:pk>/spares/remove/", views_spares.spare_remove, name="cluster_spare_remove"),
    path("<int:pk>/policy/", views_spares.cluster_policy, name="cluster_policy"),
]
