"""Functional-simulation throughput of the Python front end: GFLOP/s of simulated math on
the FA expert example and the GEMM example, beside numpy's own float32 matmul measured in
the same run (same machine, same moment).

  /usr/bin/python3 python/tools/func_bench.py [--B 1 --S 2048 --H 2] [--gemm 2048] [--repeat 3]

The scripts are loaded unmodified (FA: its `__main__` block does not run; GEMM: the script
runs at import at the size given through its own --m/--n/--k). A kernel's time is the
simulator's wall time of one functional run (compilation excluded); GFLOP/s counts the
kernel's matmuls (FA 4*B*H*S*S*D, GEMM 2*M*N*K). Quoted: min / median / max over --repeat."""

import argparse
import importlib.util
import os
import statistics
import sys
import time

from _paths import CORPUS  # noqa: E402  (importing it sets sys.path)

import numpy as np  # noqa: E402


def load(rel, name, argv=()):
    path = os.path.join(CORPUS, rel)
    sys.path.insert(0, os.path.dirname(path))
    saved, sys.argv = sys.argv, [path, *argv]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = saved
    return mod


def stats(xs):
    return f"{min(xs):8.2f} {statistics.median(xs):8.2f} {max(xs):8.2f}"


def row(name, flop, walls):
    rates = [flop / w * 1e-9 for w in walls]
    print(f"{name:34s} {flop * 1e-9:9.2f} {stats(walls)}   {stats(rates)}")


def numpy_matmul(n, repeat):
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    a @ b  # warm-up
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        a @ b
        walls.append(time.perf_counter() - t0)
    row(f"numpy f32 matmul {n}^3", 2.0 * n ** 3, walls)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--S", type=int, default=2048)
    ap.add_argument("--H", type=int, default=2)
    ap.add_argument("--gemm", type=int, default=2048, help="M = N = K of the GEMM example")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import torch

    print(f"{'':34s} {'GFLOP':>9s} {'wall s: min   median      max':>28s}   "
          f"{'GFLOP/s: min  median      max':>28s}")
    fa = load("flash_attention/fa_opt/flash_attn_bhsd_expert_h16_d128.py", "fa_expert")
    k = fa.flash_attention_fwd(batch=a.B, seq_len=a.S, heads_q=a.H, heads_kv=a.H, dim=128)
    q, kk, v = (torch.randn((a.B, a.H, a.S, 128), dtype=torch.float16) for _ in range(3))
    walls = []
    for _ in range(a.repeat):
        k(q, kk, v)
        walls.append(k.last_run[1].wall_s)
    row(f"FA expert B={a.B} S={a.S} H={a.H} D=128", 4.0 * a.B * a.H * a.S * a.S * 128, walls)

    n = str(a.gemm)
    gm = load("gemm/example_gemm.py", "gemm_example", ["--m", n, "--n", n, "--k", n])
    x = torch.randn(a.gemm, a.gemm).half()
    y = torch.randn(a.gemm, a.gemm).half()
    walls = []
    for _ in range(a.repeat):
        gm.func(x, y)
        walls.append(gm.func.last_run[1].wall_s)
    row(f"GEMM example {n}^3 f16", 2.0 * a.gemm ** 3, walls)
    numpy_matmul(a.gemm, a.repeat)


if __name__ == "__main__":
    main()
