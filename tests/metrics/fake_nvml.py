"""A stand-in for the ``pynvml`` module (there is no GPU on CI): the calls the agent makes,
each answering from the figures given, or raising ``NVMLError`` for a figure not given (not
supported on that GPU), as the real library does."""

from types import SimpleNamespace


class NVMLError(Exception):
    pass


class FakeNvml:
    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_NVLINK_MAX_LINKS = 2
    NVML_NVLINK_ERROR_DL_REPLAY = 0
    NVML_NVLINK_ERROR_DL_RECOVERY = 1
    NVML_NVLINK_ERROR_DL_CRC_FLIT = 2
    NVML_NVLINK_ERROR_DL_CRC_DATA = 3
    nvmlEventTypeXidCriticalError = 8

    def __init__(self, utils, used, total, fail=False, **per_gpu):
        """``per_gpu``: temp=[…], power_mw=[…], sm_clock=[…], throttle=[…], ecc=[(unc, cor)],
        remapped=[…], nvlink=[…] (per link and counter), xids=[(gpu, xid), …] pending."""
        self.utils, self.used, self.total, self.fail = utils, used, total, fail
        self.per_gpu = per_gpu
        self.pending = list(per_gpu.get("xids", []))

    def _get(self, name, handle):
        values = self.per_gpu.get(name)
        if values is None:
            raise NVMLError("Not Supported")
        return values[handle]

    def nvmlDeviceGetCount(self):
        return len(self.utils)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetIndex(self, handle):
        return handle

    def nvmlDeviceGetUtilizationRates(self, handle):
        if self.fail:
            raise NVMLError("GPU is lost")
        return SimpleNamespace(gpu=self.utils[handle])

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=self.used[handle], total=self.total[handle])

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return self._get("temp", handle)

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._get("power_mw", handle)

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return self._get("sm_clock", handle)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self._get("throttle", handle)

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        uncorrected, corrected = self._get("ecc", handle)
        return uncorrected if error_type == self.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else corrected

    def nvmlDeviceGetRemappedRows(self, handle):
        return (0, self._get("remapped", handle), False, False)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle, link, counter):
        return self._get("nvlink", handle)

    def nvmlEventSetCreate(self):
        if "xids" not in self.per_gpu:
            raise NVMLError("Not Supported")
        return "events"

    def nvmlDeviceRegisterEvents(self, handle, kinds, event_set):
        return None

    def nvmlEventSetWait(self, event_set, timeout_ms):
        if not self.pending:
            raise NVMLError("Timeout")
        gpu, xid = self.pending.pop(0)
        return SimpleNamespace(device=gpu, eventData=xid)
