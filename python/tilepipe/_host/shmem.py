"""`import shmem` (ACL SHMEM, memory shared across NPUs) under `tilepipe run-py`: importable,
so a script reaches its set-up; initialising it for more than one rank is a DeviceCountError
naming the number of devices the script needs (attributes.n_ranks). tilepipe simulates one die."""

import types

from tilelang._core import needs_devices


class OpEngineType:
    MTE = "MTE"
    SDMA = "SDMA"
    ROCE = "ROCE"


class InitAttr:
    def __init__(self):
        self.my_rank = 0
        self.n_ranks = 1
        self.local_mem_size = 0
        self.ip_port = ""
        self.option_attr = types.SimpleNamespace(data_op_engine_type=OpEngineType.MTE)


def set_conf_store_tls(*a, **kw):
    return 0


def aclshmem_init(attributes):
    raise needs_devices(getattr(attributes, "n_ranks", None),
                        f"aclshmem_init (rank {getattr(attributes, 'my_rank', 0)} of "
                        f"{getattr(attributes, 'n_ranks', '?')})")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def call(*a, **kw):
        raise needs_devices(None, f"shmem.{name}")

    return call
