"""Default thresholds per GPU model and fabric: the published figures for H100/H200 on
400 Gb/s ports, derived ones for L40S, a named fallback for the rest; the row is made once
and the admin's edits are what later runs judge by."""

import pytest

from clusters.models.validation import ValidationThreshold
from clusters.validation.thresholds import GENERIC, PUBLISHED_H100, threshold_for
from portal.catalog.models import FabricType, InstanceType


@pytest.mark.parametrize(
    ("model", "fabric", "figures", "source"),
    [
        ("NVIDIA H100 SXM", FabricType.INFINIBAND, (8, 400, 460.0, 440.0, 375.0), PUBLISHED_H100),
        ("NVIDIA H100 SXM", FabricType.ROCE_V2, (8, 400, 460.0, 440.0, 375.0), PUBLISHED_H100),
        ("NVIDIA H200", FabricType.INFINIBAND, (8, 400, 460.0, 440.0, 375.0), PUBLISHED_H100),
        ("NVIDIA L40S", FabricType.ROCE_V2, (2, 200, 20.0, 18.0, 192.0), None),
        ("NVIDIA B300", FabricType.INFINIBAND, (8, 400, 460.0, 440.0, 375.0), GENERIC),
    ],
)
def test_defaults(db, model, fabric, figures, source):
    itype = InstanceType.objects.create(
        code=model.lower().replace(" ", "-"), gpu_model=model, gpu_count=8, vcpu=1, memory_gib=1
    )
    row = threshold_for(itype, fabric)
    assert (
        row.ports,
        row.port_gbps,
        row.intra_busbw_gbs,
        row.multi_busbw_gbs,
        row.ib_write_bw_gbps,
    ) == figures
    assert row.margin_percent == 10 and row.source
    if source is not None:
        assert row.source == source


def test_an_edited_row_is_what_the_next_run_uses(world):
    row = threshold_for(world.h100, FabricType.INFINIBAND)
    row.ib_write_bw_gbps = 384.0  # OCI's figure
    row.save()
    assert threshold_for(world.h100, FabricType.INFINIBAND).snapshot()["ib_write_bw_gbps"] == 384.0
    assert ValidationThreshold.objects.count() == 1
