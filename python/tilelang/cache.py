"""`tilelang.cache`: the kernel cache. The original's is on disk; tilepipe's is in memory,
per @tilelang.jit factory, keyed by the factory's arguments and the chip (set_chip)."""

from . import _jit


def clear_cache():
    """Forgets every compiled kernel (they rebuild on their next call)."""
    _jit.clear_caches()


def disable_cache():
    """Factories rebuild their kernel on every call (the original's cache is on disk)."""
    _jit._cache_enabled[0] = False


def enable_cache():
    _jit._cache_enabled[0] = True


def is_cache_enabled():
    return _jit._cache_enabled[0]


disable = disable_cache
enable = enable_cache
