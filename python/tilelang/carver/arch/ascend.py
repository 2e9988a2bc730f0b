"""The Ascend die the carver sizes tiles for: the simulated chip's core count and buffer
sizes (A3 unless tilelang.set_chip("a2"))."""

from ... import _jit


class Ascend:
    def __init__(self, target="auto"):
        self.platform = "A2" if _jit.CHIP == "a2" else "A3"
        self.core_num = int(_jit.chip_config()["die"]["ai_cores"]["value"])  # AIC (cube) cores
        self.l1_size = 512 * 1024
        self.l0a_size = self.l0b_size = 64 * 1024
        self.l0c_size = 128 * 1024
        self.ub_size = 192 * 1024

    def __repr__(self):
        return f"Ascend({self.platform}, {self.core_num} cube cores)"
