"""`tilelang.cache`: the kernel cache. The original's is on disk; tilepipe's is in memory,
per @tilelang.jit factory, keyed by the factory's arguments and the chip (set_chip)."""


def clear_cache():
    """Forgets every compiled kernel (they rebuild on their next call)."""
    from . import _jit

    _jit.clear_caches()


def disable():
    from . import disable_cache

    disable_cache()


def enable():
    from . import enable_cache

    enable_cache()
