"""torch.cuda: like torch.npu, the device maps to the host under `tilepipe run-py`."""

from .npu import (  # noqa: F401
    Event,
    current_device,
    device_count,
    empty_cache,
    is_available,
    set_device,
    synchronize,
)
