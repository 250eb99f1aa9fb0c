"""Default thresholds per GPU model and fabric, and the row a run judges by.

The published figures (``PUBLISHED_H100`` names them) are for 8 × H100/H200 with 400 Gb/s ports;
the rest are derived from link rates and say so in their ``source``. An admin edits the rows
(``ValidationThreshold``); a missing row is made from here the first time a run needs it.
"""

from dataclasses import dataclass

from django.db import IntegrityError, transaction

from clusters.models.validation import ValidationThreshold
from portal.catalog.models import FabricType

PUBLISHED_H100 = (
    "Azure azurehpc-health-checks (aznhc) conf/nd96isr_h100_v5.conf: 노드 내 NCCL all-reduce "
    "busbw ≥ 460 GB/s, ib_write_bw ≥ 375 Gb/s (400G 포트). OCI oci-hpc 헬스 체크: 2노드 "
    "all-reduce ≥ 440 GB/s (ib_write_bw는 384 Gb/s를 씀). RoCE와 InfiniBand에 같은 기준."
)
DERIVED_L40S = (
    "공개된 기준 없음, 링크 속도에서 추정: 200G 포트의 ib_write_bw ≥ 192 Gb/s (OCI의 200G "
    "기준). L40S는 NVLink 없이 PCIe Gen4 x16(실효 약 26 GB/s)으로 통신하므로 노드 내 "
    "busbw ≥ 20 GB/s, 노드 간도 PCIe가 상한이라 ≥ 18 GB/s (실효 대역폭의 약 75%)."
)
GENERIC = (
    "이 GPU 모델의 기준이 없어 8×H100 400G의 공개 기준을 그대로 씁니다 (Azure aznhc, OCI "
    "oci-hpc). 이 인스턴스 유형에 맞게 조정하세요."
)


@dataclass(frozen=True)
class Default:
    ports: int
    port_gbps: int
    intra_busbw_gbs: float
    multi_busbw_gbs: float
    ib_write_bw_gbps: float
    source: str


H100 = Default(8, 400, 460.0, 440.0, 375.0, PUBLISHED_H100)
# (a word of the GPU model, fabric or None for any): the first match wins.
DEFAULTS = [
    ("H100", None, H100),
    ("H200", None, H100),
    ("L40S", FabricType.ROCE_V2, Default(2, 200, 20.0, 18.0, 192.0, DERIVED_L40S)),
    ("L40S", None, Default(2, 200, 20.0, 18.0, 192.0, DERIVED_L40S)),
]


def default_for(instance_type, fabric) -> Default:
    model = instance_type.gpu_model.upper()
    for word, wanted, default in DEFAULTS:
        if word in model and wanted in (None, fabric):
            return default
    return Default(**{**H100.__dict__, "source": GENERIC})


def threshold_for(instance_type, fabric) -> ValidationThreshold:
    """The (instance type, fabric) row, made from ``DEFAULTS`` if there is none yet."""
    row = ValidationThreshold.objects.filter(instance_type=instance_type, fabric=fabric).first()
    if row is not None:
        return row
    default = default_for(instance_type, fabric)
    try:
        with transaction.atomic():
            return ValidationThreshold.objects.create(
                instance_type=instance_type, fabric=fabric, **default.__dict__
            )
    except IntegrityError:  # made by a concurrent run meanwhile
        return ValidationThreshold.objects.get(instance_type=instance_type, fabric=fabric)
