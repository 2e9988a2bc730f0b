"""`tilelang.jit.adapter`: the original's launchers of compiled NPU libraries. tilepipe
simulates kernels instead of building libraries; using one is a clear error."""

from ..._core import unsupported_class as _unsupported_class

CythonKernelAdapter = _unsupported_class(
    "tilelang.jit.adapter.CythonKernelAdapter",
    "tilepipe simulates the kernel: call the @tilelang.jit kernel directly")
BaseKernelAdapter = CythonKernelAdapter
