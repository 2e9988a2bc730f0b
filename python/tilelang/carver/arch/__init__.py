from .ascend import Ascend  # noqa: F401
