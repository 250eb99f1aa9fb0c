"""metrics' console pages: a VM's agent token, a cluster's 메트릭 tab."""

import plotly.io as pio
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from clusters.models import VirtualCluster
from metrics import services
from metrics.figures import figures as draw_figures
from metrics.figures import script_safe
from metrics.storage import charts, events, straggler
from portal.iam.permissions import Perm
from portal.models import readable
from vms.models import VirtualMachine


def agent_command(request, token="<TOKEN>"):  # noqa: S107 - a placeholder shown in the command
    url = request.build_absolute_uri(reverse("metrics:ingest"))
    return f"vc-metrics-agent --url {url} --token {token}"


@never_cache
@login_required
@require_POST
def vm_token_rotate(request, pk):
    """Issue or rotate VM ``pk``'s agent token and show it, once."""
    vm = get_object_or_404(readable(request.user, Perm.VM_READ, VirtualMachine), pk=pk)
    vm, token = services.rotate_token(vm.pk, actor=request.user)
    template = "metrics/vm_token.html#token" if request.htmx else "metrics/vm_token.html"
    context = {"vm": vm, "token": token, "command": agent_command(request, token)}
    return render(request, template, context)  # never_cache: no-store, the token is in it


def _range_of(request) -> str:
    range_key = request.GET.get("range", charts.DEFAULT_RANGE)
    return range_key if range_key in charts.RANGES else charts.DEFAULT_RANGE


@login_required
@require_GET
def cluster_charts(request, pk):
    """The 메트릭 tab of cluster ``pk``: the whole panel, or only its figures (``#body``) when
    the range controls or the 30-second refresh ask for them. The per-device panel (slowest
    GPU and port, heatmap, 하위 5) reads every member's devices: it is its own request
    (``cluster_devices``), loaded once the charts are on screen."""
    cluster = get_object_or_404(readable(request.user, Perm.CLUSTER_READ, VirtualCluster), pk=pk)
    range_key = _range_of(request)
    # Member names are VM data: the per-member breakdown and the devices need VM READ too.
    vm_read = request.user.has_perm(Perm.VM_READ, cluster)
    per_member = request.GET.get("per_member") == "1" and vm_read
    data = charts.chart_data(cluster, range_key, per_member)
    last = straggler.last_received([vm_id for vm_id, _name in data.members])
    figures = []
    if data.has_data:
        markers = events.chart_markers(cluster.pk, data.start)
        figures = draw_figures(data, data.link_capacity_gbps, markers)
    devices_url = None
    if data.has_data and vm_read:
        devices_url = reverse("metrics:cluster_devices", args=[cluster.pk]) + f"?range={range_key}"
    context = {
        "cluster": cluster,
        "data": data,
        "figures": figures,
        "devices_url": devices_url,
        "last_received": last,
        "ranges": range_labels(),
        "range_key": range_key,
        "per_member": per_member,
        "auto_refresh": range_key == "1h",
        "agent_command": agent_command(request),
    }
    partial = request.htmx and request.htmx.target == "metrics-body"
    template = "metrics/charts.html#body" if partial else "metrics/charts.html"
    return render(request, template, context)


@login_required
@require_GET
def cluster_devices(request, pk):
    """The 메트릭 tab's per-device panel of cluster ``pk`` over the range: the straggler GPU
    and port if there is one (``straggler.find_straggler``, by the cluster's 검증 기준), else
    that there is none, 방금 합류 and 교체됨 members, the node × GPU heatmap and the
    하위 5, from each member's own series (``straggler``). Device names are VM data: without
    VM READ the panel is empty."""
    cluster = get_object_or_404(readable(request.user, Perm.CLUSTER_READ, VirtualCluster), pk=pk)
    seconds = charts.RANGES[_range_of(request)].seconds
    devices = straggler.DeviceView()
    if request.user.has_perm(Perm.VM_READ, cluster):
        devices = straggler.cluster_view(cluster, seconds)
    heatmap = straggler.heatmap_figure(devices, heatmap_labels())
    context = {
        "devices": devices,
        "heatmap_json": heatmap
        and script_safe(pio.to_json(heatmap, validate=False, engine="orjson")),
    }
    return render(request, "metrics/charts.html#devices", context)


# Colour-blind-safe scales (no red-green axis), by the names plotly.js knows (its core has
# them, so the vendored bundle does): utilisation on 0-100 % in cividis, dark at idle and
# yellow at full, so a uniformly busy cluster stays bright rather than stretching noise over
# the scale.
UTIL_SCALE = "Cividis"


def heatmap_labels():
    """The heatmap's metrics: {field: (button, unit, colorscale, z range or None)}."""
    return {
        "util": (_("사용률"), "%", UTIL_SCALE, (0, 100)),
        "temp": (_("온도"), "°C", "Viridis", None),
        "power": (_("전력"), "W", "Viridis", None),
    }


def range_labels():
    return [("1h", _("1시간")), ("6h", _("6시간")), ("24h", _("24시간")), ("7d", _("7일"))]
