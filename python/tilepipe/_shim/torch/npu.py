"""torch.npu: the NPU device maps to the host under `tilepipe run-py`."""


class _Config:
    """torch.npu.config: switches of the NPU runtime (no effect on the host)."""

    allow_internal_format = False


config = _Config()


def synchronize(*a, **kw):
    pass


def is_available():
    return True


def set_device(*a, **kw):
    pass


def current_device():
    return 0


def device_count():
    return 1


class Event:
    def __init__(self, enable_timing=False, **kw):
        pass

    def record(self, *a):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 0.0


def empty_cache():
    pass
