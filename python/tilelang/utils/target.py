"""`tilelang.utils.target`: which Ascend platform a kernel is built for."""

from .._core import TilelangError

PLATFORMS = ("A2", "A3", "A5")
# Device names the NPU runtime reports (torch.npu.get_device_properties(...).name).
_BY_DEVICE_NAME = (("Ascend910_93", "A3"), ("Ascend910B", "A2"), ("Ascend950", "A5"))


def determine_platform(target="auto"):
    """"A2" / "A3" / "A5" given explicitly, or from the device's name with "auto" (A3 when no
    NPU is available, as the original). Under tilepipe the device is the simulated chip
    (tilelang.set_chip)."""
    t = str(target)
    if t.upper() in PLATFORMS:
        return t.upper()
    if t != "auto":
        raise TilelangError(f"unknown platform {target!r}", hint="one of auto, A2, A3, A5")
    try:
        import torch

        if not torch.npu.is_available():
            return "A3"
        name = str(torch.npu.get_device_properties(0).name)
    except Exception:
        return "A3"
    for prefix, platform in _BY_DEVICE_NAME:
        if name.startswith(prefix):
            return platform
    return "A3"
