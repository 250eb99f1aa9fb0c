"""The per-GPU and per-port arrays of an ingest batch: checked whole, like the
host fields, before anything is written.

A sample may carry ``"gpus": [{"gpu": 0, "util": 97.0, "temp": 61, …}, …]`` and
``"ports": [{"port": 0, "rx": 4.6e10, "rate_gbps": 400, …}, …]``: each entry names its device
index (0-63, once per sample) and any of the fields of ``GPU_FIELDS`` / ``PORT_FIELDS``
(absent or null: not measured). The entries are flattened into columns, one per field, and
each column checked by ``metrics.ingest.checks.check_column``; a refusal names the sample, the entry
and the field (``samples[3].gpus[2].temp``).
"""

from django.utils.translation import gettext as _

from metrics import errors
from metrics.ingest.checks import check_column, shown
from metrics.models.devices import GPU_FIELDS, MAX_DEVICES, PORT_FIELDS

# (sample key, storage table, index key, field table)
KINDS = (("gpus", "gpu", "gpu", GPU_FIELDS), ("ports", "port", "port", PORT_FIELDS))
DEVICE_KEYS = tuple(key for key, *_rest in KINDS)


def device_columns(lists: list, micros: list, where: str) -> dict:
    """``{"gpu"|"port": [indexes, micros, *field columns]}`` from ``lists`` (per device kind,
    the value of each sample: a list of entries, or None), or ``IngestError``."""
    out = {}
    for (key, table, index_key, fields), per_sample in zip(KINDS, lists, strict=True):
        columns = _flatten(key, index_key, fields, per_sample, micros, where)
        if columns is not None:
            out[table] = columns
    return out


def _flatten(key, index_key, fields, per_sample, micros, where):
    if per_sample.count(None) == len(per_sample):  # C-level: a host-only backlog costs ~0
        return None
    names = {name for name, *_rest in fields} | {index_key}
    owners, positions, entries = [], [], []
    for sample_index, value in enumerate(per_sample):
        if value is None:
            continue
        at = f"{where}[{sample_index}].{key}"
        if type(value) is not list or len(value) > MAX_DEVICES:
            raise errors.Invalid(
                _("%(where)s: 최대 %(limit)d개 항목의 배열이어야 합니다.")
                % {"where": at, "limit": MAX_DEVICES}
            )
        seen: set = set()
        for position, entry in enumerate(value):
            _check_entry(entry, names, index_key, f"{at}[{position}]", seen)
            owners.append(sample_index)
            positions.append(position)
            entries.append(entry)
    if not entries:
        return None

    def place(i):
        return f"{where}[{owners[i]}].{key}", positions[i]

    columns = [[entry[index_key] for entry in entries], [micros[i] for i in owners]]
    for name, nullable, lowest, highest in fields:
        column = [entry.get(name) for entry in entries]
        check_column(column, name, nullable, lowest, highest, where, place)
        columns.append(column)
    return columns


def _check_entry(entry, names, index_key, at, seen):
    if type(entry) is not dict:
        raise errors.Invalid(_("%(where)s: JSON 객체여야 합니다.") % {"where": at})
    extra = entry.keys() - names
    if extra:
        raise errors.UnknownField(
            _("%(where)s: 알 수 없는 필드 %(name)s")
            % {"where": at, "name": shown(sorted(extra)[0])}
        )
    index = entry.get(index_key)
    if type(index) is not int or not 0 <= index < MAX_DEVICES:
        raise errors.Invalid(
            _("%(where)s.%(name)s: 0 이상 %(high)d 이하의 정수여야 합니다 (받은 값 %(value)s).")
            % {"where": at, "name": index_key, "high": MAX_DEVICES - 1, "value": shown(index)}
        )
    if index in seen:
        raise errors.Invalid(
            _("%(where)s.%(name)s: 같은 샘플에 %(value)d번 장치가 두 번 있습니다.")
            % {"where": at, "name": index_key, "value": index}
        )
    seen.add(index)
