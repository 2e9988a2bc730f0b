"""torch_npu under `tilepipe run-py`: the vendor ops the corpus's drivers call, replaced by
numpy golden models (npu_sparse_flash_attention -> sfa_golden.cpu_sparse_flash_attention,
the reference model shipped next to the corpus's SFA kernels)."""

import importlib
import os
import sys


def _golden():
    try:
        return importlib.import_module("sfa_golden")
    except ImportError:
        pass
    # The corpus keeps sfa_golden.py one directory above the driver.
    for base in list(sys.path):
        cand = os.path.join(base or ".", "..", "sfa_golden.py")
        if os.path.exists(cand):
            sys.path.append(os.path.abspath(os.path.dirname(cand)))
            return importlib.import_module("sfa_golden")
    raise ImportError(
        "torch_npu.npu_sparse_flash_attention under tilepipe run-py uses sfa_golden.py as its "
        "reference; put it on PYTHONPATH")


def npu_sparse_flash_attention(query, key, value, sparse_indices, scale_value, sparse_block_size,
                               actual_seq_lengths_query, actual_seq_lengths_kv, query_rope=None,
                               key_rope=None, layout_query="BSND", layout_kv="BSND",
                               sparse_mode=3, block_table=None, attention_mode=None, **kw):
    g = _golden()
    out = g.cpu_sparse_flash_attention(
        query, key, value, sparse_indices, scale_value, sparse_block_size,
        actual_seq_lengths_query, actual_seq_lengths_kv, query_rope=query_rope,
        key_rope=key_rope, layout_query=layout_query, layout_kv=layout_kv,
        sparse_mode=sparse_mode, block_table=block_table)
    import torch

    if not isinstance(out, torch.Tensor):
        out = torch.tensor(out)
    return out, None, None


npu_sparse_flash_attention.__name__ = "npu_sparse_flash_attention"
