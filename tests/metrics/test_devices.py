"""Per-GPU and per-port rows: ingested with their sample, all or nothing, by every write path
(one statement, COPY, the simulator's), rolled up like the host series."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from metrics import storage
from metrics.models import GpuMinuteRollup, GpuSample, PortSample, Sample
from tests.metrics.conftest import sample


def gpus(util=97.0, count=8, **overrides):
    return [
        {
            "gpu": i,
            "util": util - i,
            "mem_used": 61000.0,
            "mem_total": 81559.0,
            "temp": 60 + i,
            "power": 650.5,
            "sm_clock": 1980,
            "throttle": 0,
            "ecc_uncorrected": 0,
            "ecc_corrected": 2,
            "remapped_rows": 0,
            "nvlink_errors": 0,
            "xid": 0,
            **overrides,
        }
        for i in range(count)
    ]


def ports(count=4):
    return [
        {
            "port": i,
            "rx": 4.6e10,
            "tx": 4.5e10,
            "symbol_errors": 0,
            "link_downed": 0,
            "rcv_errors": 0,
            "state": 4,
            "rate_gbps": 400,
        }
        for i in range(count)
    ]


def test_an_agent_sample_with_8_gpus_and_4_ports_is_stored(post, token, running_vm):
    ts = time.time()
    response = post(token, {"samples": [sample(ts, gpus=gpus(), ports=ports())]})
    assert response.status_code == 200, response.content
    stored = list(
        GpuSample.objects.filter(vm=running_vm)
        .order_by("gpu")
        .values_list("gpu", "util", "temp", "ecc_corrected")
    )
    assert stored == [(i, 97.0 - i, 60.0 + i, 2.0) for i in range(8)]
    assert PortSample.objects.filter(vm=running_vm, rate_gbps=400, state=4).count() == 4
    assert Sample.objects.filter(vm=running_vm).count() == 1


def test_the_compact_form_carries_devices_too(post, token, running_vm):
    fields = ["ts", "cpu_util", "mem_util", "net_rx", "net_tx", "gpus", "ports"]
    rows = [[time.time() - i, 10.0, 20.0, 1.0, 2.0, gpus(count=2), ports(1)] for i in range(3)]
    response = post(token, {"fields": fields, "rows": rows})
    assert response.status_code == 200, response.content
    assert GpuSample.objects.filter(vm=running_vm).count() == 6
    assert PortSample.objects.filter(vm=running_vm).count() == 3


@pytest.mark.parametrize(
    ("mutate", "detail"),
    [
        (lambda s: s["gpus"][1].update(temp="hot"), "samples[0].gpus[1].temp"),
        (lambda s: s["gpus"][2].update(util=101), "samples[0].gpus[2].util"),
        (lambda s: s["gpus"][3].update(gpu=1), "samples[0].gpus[3].gpu"),
        (lambda s: s["gpus"][0].pop("gpu"), "samples[0].gpus[0].gpu"),
        (lambda s: s["gpus"][0].update(fan=3), "samples[0].gpus[0]"),
        (lambda s: s["ports"][3].update(rx=-1), "samples[0].ports[3].rx"),
        (lambda s: s.update(ports={"port": 0}), "samples[0].ports"),
        (lambda s: s.update(gpus=[1, 2]), "samples[0].gpus[0]"),
    ],
)
def test_a_bad_device_entry_refuses_the_whole_batch(post, token, running_vm, mutate, detail):
    good = sample(time.time() - 5, gpus=gpus(), ports=ports())
    bad = sample(time.time(), gpus=gpus(), ports=ports())
    mutate(bad)
    response = post(token, {"samples": [good, bad]})
    assert response.status_code == 400
    text = response.json()["detail"]
    assert detail.replace("samples[0]", "samples[1]") in text, text
    assert not Sample.objects.filter(vm=running_vm).exists()
    assert not GpuSample.objects.filter(vm=running_vm).exists()
    assert not PortSample.objects.filter(vm=running_vm).exists()


def test_a_column_mixing_values_and_nulls_is_stored_as_sent(post, token, running_vm):
    """The one-statement path sends each device column as a binary array packed by hand
    (``metrics.storage.binary.array``): nulls, JSON integers and the instant come back as
    sent."""
    devices = gpus()
    devices[3]["util"] = None  # a counter the driver lost for one GPU
    devices[5]["temp"] = None
    response = post(token, {"samples": [sample(time.time(), gpus=devices, ports=ports())]})
    assert response.status_code == 200, response.content
    stored = list(
        GpuSample.objects.filter(vm=running_vm)
        .order_by("gpu")
        .values_list("gpu", "util", "temp", "sm_clock", "ts")
    )
    (host_ts,) = Sample.objects.filter(vm=running_vm).values_list("ts", flat=True)
    assert stored == [
        (i, None if i == 3 else 97.0 - i, None if i == 5 else 60.0 + i, 1980.0, host_ts)
        for i in range(8)
    ]


def test_a_resent_batch_with_devices_is_a_duplicate_and_stores_nothing_more(
    post, token, running_vm
):
    batch = {"samples": [sample(time.time(), gpus=gpus(), ports=ports())]}
    assert post(token, batch).status_code == 200
    assert post(token, batch).status_code == 409
    assert GpuSample.objects.filter(vm=running_vm).count() == 8


def test_a_large_batch_with_devices_goes_by_copy_and_matches(world):
    vm = world.vm("copy-devices")
    base = timezone.now().timestamp() - 600
    n = 40
    columns = [
        storage.to_micros(base + i * 10 for i in range(n)),
        *([[1.0] * n] * 2),
        [None] * n,
        [None] * n,
        *([[5.0] * n] * 2),
        [None] * n,
        [None] * n,
    ]
    gpu_rows = [[i % 8 for i in range(8 * n)], [columns[0][i // 8] for i in range(8 * n)]]
    gpu_rows += [[float(i) for i in range(8 * n)]] + [[None] * (8 * n)] * 11
    storage.write_batch(vm.pk, columns, devices={"gpu": gpu_rows})
    stored = list(
        GpuSample.objects.filter(vm=vm).order_by("ts", "gpu").values_list("gpu", "util", "temp")
    )
    assert stored == [(i % 8, float(i), None) for i in range(8 * n)]


def test_gpu_rows_roll_up_per_gpu(world):
    vm = world.vm("roll-gpu")
    minute = storage.floor_to(timezone.now(), 60) - timedelta(minutes=10)
    rows, gpu_rows = [], []
    for k, util in enumerate((90.0, 60.0, 30.0)):
        at = minute + timedelta(seconds=10 * k + 1)
        rows.append((vm.pk, at, 1.0, 1.0, None, None, 1.0, 1.0, None, None))
        gpu_rows += [(vm.pk, at, 0, util, *[None] * 11), (vm.pk, at, 5, util / 2, *[None] * 11)]
    storage.write_samples(rows, devices={"gpu": gpu_rows})
    storage.rollup()
    got = {
        r.gpu: (r.n, r.util_avg, r.util_max)
        for r in GpuMinuteRollup.objects.filter(vm=vm, bucket=minute)
    }
    assert got == {0: (3, 60.0, 90.0), 5: (3, 30.0, 45.0)}
