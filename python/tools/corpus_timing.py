"""Simulated time of a corpus kernel built through the Python front end, next to the numbers
docs/fidelity.md compares with tilepipe's C++ kernels.

  /usr/bin/python3 python/tools/corpus_timing.py fa-expert --S 32768 --H 12
  /usr/bin/python3 python/tools/corpus_timing.py sfa --file sparse_flash_attn_pa_developer

Loads the unmodified script as a module (its `__main__` block does not run) with the runner's
torch shim on the path, builds the kernel, and reports lowering time and simulated time."""

import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "tilepipe", "_shim"),
                os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))]
CORPUS = os.environ.get("TILELANG_CORPUS",
                        os.path.join(os.path.dirname(ROOT), "shared", "tilelang-ascend", "examples"))


def load(rel, name):
    path = os.path.join(CORPUS, rel)
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", choices=["fa-expert", "fa-auto", "sfa"])
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--S", type=int, default=32768)
    ap.add_argument("--H", type=int, default=12)
    ap.add_argument("--file", default="sparse_flash_attn_pa_developer")
    ap.add_argument("--exact", action="store_true")
    a = ap.parse_args()
    import numpy as np

    if a.kernel.startswith("fa"):
        rel = ("flash_attention/fa_opt/flash_attn_bhsd_expert_h16_d128.py" if a.kernel == "fa-expert"
               else "flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h16_d128.py")
        mod = load(rel, "fa_mod")
        t0 = time.perf_counter()
        k = mod.flash_attention_fwd(batch=a.B, seq_len=a.S, heads_q=a.H, heads_kv=a.H, dim=128)
        build_s = time.perf_counter() - t0
        shape = (a.B, a.H, a.S, 128)
        args = [np.zeros(shape, np.float16)] * 3
    else:
        mod = load(f"sparse_flash_attention/bench_sfa/{a.file}.py", "sfa_mod")
        t0 = time.perf_counter()
        k = mod.sparse_attention_fwd(heads=128, dim=512, tail_dim=64, topk=2048, block_num=20,
                                     block_size=128, core_num=24) \
            if hasattr(mod, "sparse_attention_fwd") else None
        build_s = time.perf_counter() - t0
        raise SystemExit("sfa timing: call the driver (bench_sfa.py) instead")
    c = k._compile({})
    ms = k.profile(*args, exact=a.exact)
    cycles = k.last_run[1].cycles
    print(f"{a.kernel} B={a.B} S={a.S} H={a.H}: lower {c.lower_s:.3f} s (factory {build_s:.3f} s, "
          f"compile {c.compiled.compile_wall_s:.3f} s); simulated {cycles:.0f} cycles = "
          f"{ms * 1000:.1f} us on {c.compiled.chip}")


if __name__ == "__main__":
    main()
