"""`tilelang.utils`: the original's helper modules the scripts import."""

from . import target  # noqa: F401
