"""torch.nn under the runner: the activation modules reference code builds."""

import numpy as _np

from . import functional  # noqa: F401
from .. import Tensor


class Module:
    def __call__(self, *a, **kw):
        return self.forward(*a, **kw)


class GELU(Module):
    def __init__(self, approximate="none"):
        self.approximate = approximate

    def forward(self, x):
        return functional.gelu(x, approximate=self.approximate)


class SiLU(Module):
    def forward(self, x):
        return functional.silu(x)


class ReLU(Module):
    def forward(self, x):
        return functional.relu(x)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        self.negative_slope = negative_slope

    def forward(self, x):
        return Tensor(_np.where(x.a >= 0, x.a, x.a * self.negative_slope).astype(x.a.dtype),
                      x.dtype)


class Sigmoid(Module):
    def forward(self, x):
        return Tensor(1.0 / (1.0 + _np.exp(-x.a.astype(_np.float32))), x.dtype)
