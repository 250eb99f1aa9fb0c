"""The agent: real psutil figures through the live server into the chart; fabric counters
from a fake /sys/class/infiniband; buffering, backoff and refusals without crashing."""

import socket
import statistics
import time
from collections import defaultdict

import pytest
from django.core.cache import cache

from clusters.models import ClusterStatus
from metrics import services
from metrics.models import Sample
from metrics.storage import charts
from metrics.vm_agent import collect as agent_collect
from metrics.vm_agent import main as agent
from tests.metrics.fake_nvml import FakeNvml
from vms.models import VmStatus

live = pytest.mark.django_db(transaction=True)


def write_port(root, device, port, rcv_words, xmit_words):
    counters = root / device / "ports" / str(port) / "counters"
    counters.mkdir(parents=True, exist_ok=True)
    (counters / "port_rcv_data").write_text(f"{rcv_words}\n")
    (counters / "port_xmit_data").write_text(f"{xmit_words}\n")


@pytest.fixture
def infiniband(tmp_path):
    root = tmp_path / "infiniband"
    write_port(root, "mlx5_0", 1, 1_000, 2_000)
    write_port(root, "mlx5_1", 1, 10_000, 20_000)
    (root / "mlx5_2" / "ports" / "1" / "counters").mkdir(parents=True)  # no counter files
    return root


def test_fabric_counters_are_words_read_per_port(infiniband):
    ports = agent.devices.read_ports(infiniband)
    assert [(p["port"], p["rx_bytes"], p["tx_bytes"]) for p in ports] == [
        (0, 1_000 * 4, 2_000 * 4),
        (1, 10_000 * 4, 20_000 * 4),
        (2, None, None),
    ]


def test_fabric_rates_from_the_fake_tree(infiniband):
    now = [100.0]
    collector = agent.Collector(infiniband, clock=lambda: now[0])
    write_port(infiniband, "mlx5_0", 1, 1_000 + 250_000, 2_000 + 500_000)
    now[0] += 10.0
    sample = collector.collect()
    assert sample["fabric_rx"] == 250_000 * 4 / 10  # 100 kB/s
    assert sample["fabric_tx"] == 500_000 * 4 / 10
    assert sample["ports"][0] == {"port": 0, "rx": 100_000.0, "tx": 200_000.0}
    assert sample["ports"][1] == {"port": 1, "rx": 0.0, "tx": 0.0}
    # A counter that went back (HCA reset) gives no rate rather than a negative one.
    write_port(infiniband, "mlx5_1", 1, 0, 20_000)
    now[0] += 10.0
    assert collector.collect()["fabric_rx"] is None


def test_no_infiniband_and_no_gpu_mean_null_fields(tmp_path):
    collector = agent.Collector(tmp_path / "absent")
    sample = collector.collect()
    assert sample["fabric_rx"] is None and sample["gpu_util"] is None
    assert 0 <= sample["cpu_util"] <= 100 and 0 < sample["mem_util"] <= 100
    assert sample["net_rx"] >= 0


def test_without_nvidia_ml_py_or_a_gpu_nvml_is_skipped():
    # No GPU here: either pynvml is missing or NVML finds no driver; either way, no crash.
    assert agent.devices.open_nvml() is None


def fake_nvml(utils, used, total, fail=False):
    """A stand-in for pynvml with only utilisation and memory supported (no GPU on CI)."""
    return FakeNvml(utils=utils, used=used, total=total, fail=fail)


def test_gpus_are_averaged_and_a_failing_gpu_does_not_crash():
    mib = agent.devices.MIB
    nvml = fake_nvml([100, 50], [40 * mib, 20 * mib], [80 * mib, 80 * mib])
    gpus = agent.devices.NvmlGpus(nvml).read()
    assert [(g["gpu"], g["util"], g["mem_used"], g["temp"]) for g in gpus] == [
        (0, 100, 40, None),
        (1, 50, 20, None),
    ]
    assert agent_collect.gpu_summary(gpus) == (75.0, 100.0 * 60 / 160)
    lost = agent.devices.NvmlGpus(fake_nvml([1], [1], [2], fail=True)).read()
    assert lost[0]["util"] is None and agent_collect.gpu_summary(lost) == (None, 50.0)


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/metrics/ingest"


def test_unreachable_portal_buffers_boundedly_and_backs_off(tmp_path):
    a = agent.Agent(
        closed_port_url(), "vcm_x", buffer_size=3, timeout=1, collector=agent.Collector(tmp_path)
    )
    for _ in range(5):
        a.next_send = 0  # post on every tick, as if each backoff had passed
        a.tick()
    assert len(a.buffer) == 3 and a.dropped == 2 and a.failures == 5
    a.tick()
    assert a.next_send > time.monotonic()  # backing off now: this tick did not post
    assert a.failures == 5


@pytest.fixture
def agent_setup(world, live_server):
    cache.clear()
    cluster = world.cluster("agent", status=ClusterStatus.RUNNING)
    (vm,) = world.members(cluster, 1, status=VmStatus.RUNNING)
    _vm, token = services.rotate_token(vm.pk, actor=None)
    return cluster, vm, token, f"{live_server.url}/api/metrics/ingest"


@live
def test_agent_posts_real_psutil_figures_that_show_in_the_chart(agent_setup, infiniband):
    cluster, vm, token, url = agent_setup
    a = agent.Agent(url, token, interval=0.2, collector=agent.Collector(infiniband))
    sent = []
    for _ in range(3):
        write_port(infiniband, "mlx5_0", 1, 1_000 + 1_000 * len(sent), 2_000)
        sent.append(a.tick())
        time.sleep(0.2)
    assert a.stored == 3 and not a.buffer
    stored = list(Sample.objects.filter(vm=vm).order_by("ts"))
    assert [s.cpu_util for s in stored] == [s["cpu_util"] for s in sent]
    assert [s.mem_util for s in stored] == [s["mem_util"] for s in sent]
    assert stored[-1].fabric_rx > 0 and stored[-1].fabric_tx == 0

    data = charts.chart_data(cluster, "1h")
    by_bucket = defaultdict(list)
    for s in sent:
        by_bucket[int(s["ts"]) // data.step].append(s["cpu_util"])
    for bucket, values in by_bucket.items():
        assert data.series["cpu_util"][bucket - data.first_bucket] == pytest.approx(
            statistics.fmean(values)
        )


@live
def test_agent_splits_a_refused_big_batch_and_drops_an_invalid_one(agent_setup, settings, tmp_path):
    _cluster, vm, token, url = agent_setup
    settings.METRICS_MAX_BATCH_SAMPLES = 2
    a = agent.Agent(url, token, collector=agent.Collector(tmp_path))
    for i in range(5):
        a.add({**a.collector.collect(), "ts": time.time() - 50 + i})
    a.add({**a.collector.collect(), "cpu_util": -1.0})  # refused (400): dropped
    assert a.flush() is True
    assert a.batch_size <= 2 and not a.buffer
    assert Sample.objects.filter(vm=vm).count() == 5


@live
def test_agent_with_a_bad_token_keeps_its_samples_and_backs_off(agent_setup, tmp_path):
    _cluster, _vm, _token, url = agent_setup
    a = agent.Agent(url, "vcm_wrong", collector=agent.Collector(tmp_path))
    a.tick()
    assert len(a.buffer) == 1 and a.failures == 1 and a.next_send > time.monotonic()


@live
def test_check_command_names_the_vm(agent_setup, capsys):
    _cluster, vm, token, url = agent_setup
    assert agent.main(["--url", url, "--token", token, "--check"]) == 0
    assert f"VM {vm.pk}" in capsys.readouterr().out
    assert agent.main(["--url", url, "--token", "vcm_nope", "--check"]) == 1


@live
def test_agent_flushes_a_backlog_gzipped_after_an_outage(agent_setup, tmp_path):
    _cluster, vm, token, url = agent_setup
    a = agent.Agent(url, token, collector=agent.Collector(tmp_path))
    first = a.collector.collect()
    now = time.time()
    for i in range(600):  # 100 minutes at 10 s, as if the portal had been down
        a.add({**first, "ts": round(now - 6000 + i * 10, 3)})
    assert len(",".join(a.buffer)) > agent.GZIP_ABOVE
    assert a.flush() is True and a.stored == 600
    assert Sample.objects.filter(vm=vm).count() == 600
    from metrics.models import RollupBacklog

    assert RollupBacklog.objects.filter(vm_id=vm.pk).exists()  # its buckets get redone
