"""Simulated time of a corpus kernel built through the Python front end, next to the numbers
docs/fidelity.md compares with tilepipe's C++ kernels. The published anchors (these files
at their measured shapes) are `tilepipe fidelity` (configs/fidelity.json); this tool keeps the
experiments that command does not run (`--cpp-inputs`, other shapes, `--exact`).

  /usr/bin/python3 python/tools/corpus_timing.py fa-expert --S 32768 --H 12 --KV-H 1
  /usr/bin/python3 python/tools/corpus_timing.py sfa --file sparse_flash_attn_pa_developer
  /usr/bin/python3 python/tools/corpus_timing.py sfa --file sparse_flash_attn_pa_baseline \
      --cpp-inputs 1

`--lowering tilepipe` (or `both`) builds automatic kernels with tilepipe's own passes
instead of the original's split (docs/python.md, "Two lowerings"):

  /usr/bin/python3 python/tools/corpus_timing.py fa-auto --lowering both

fa-expert / fa-auto build the file's factory at B, S, H query heads and KV-H kv heads (default
1: the published shape is GQA 12:1, B=1, H=12, KV-H=1, D=128).
sfa runs the file's kernel on bench_sfa.py's first shape (KV_S=2560, T=1, H=128, topk=2048,
scale 0.5) with the bench's inputs (the shim's torch, seed 42 as bench_sfa.py's init_test),
or with `--cpp-inputs SEED` on the indices and block table that `tilepipe run sfa --seed SEED`
generates (kernels/sfa.cc inputs(): 1 in 16 indices -1, a permuted block table).

Loads the unmodified script as a module (its `__main__` block does not run) with the runner's
torch shim on the path, builds the kernel, and reports lowering time and simulated time."""

import argparse
import importlib.util
import os
import sys
import time

from _paths import CORPUS  # noqa: E402  (importing it sets sys.path)


def load(rel, name):
    path = os.path.join(CORPUS, rel)
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cpp_sfa_inputs(seed, kv_s, topk, act):
    """The block table and indices of kernels/sfa.cc inputs() (its splitmix64 stream)."""
    m = (1 << 64) - 1
    state = [(seed * 0x2545F4914F6CDD1D + 3) & m]

    def nxt():
        state[0] = (state[0] + 0x9E3779B97F4A7C15) & m
        z = state[0]
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        return z ^ (z >> 31)

    perm = list(range(kv_s // 128))
    for i in range(len(perm), 1, -1):
        j = nxt() % i
        perm[i - 1], perm[j] = perm[j], perm[i - 1]
    pos = list(range(kv_s))
    for i in range(act - 1, 1, -1):
        j = 1 + nxt() % i
        pos[i], pos[j] = pos[j], pos[i]
    idx = []
    for j in range(topk):
        v, u = pos[j % kv_s], nxt() % 16
        if j > 0 and u == 0:
            v = -1
        if j > 0 and u == 1 and act < kv_s:
            v = act + nxt() % (kv_s - act)
        idx.append(v)
    return perm, idx


def sfa_inputs(cpp_seed, kv_s=2560, heads=128, topk=2048, act=2560):
    """bench_sfa.py's first test_op, in its order of random draws; the kernel's arguments."""
    import numpy as np
    import torch

    torch.manual_seed(42)
    bf = torch.bfloat16
    query = torch.empty((1, heads, 512), dtype=bf).normal_(mean=0.0, std=0.5)
    key = torch.empty((kv_s // 128, 128, 1, 512), dtype=bf).normal_(mean=0.0, std=0.5)
    _, indices = torch.topk(torch.rand(1, 1, act), topk, dim=-1)
    indices = indices.to(torch.int32)
    table = torch.tensor([range(kv_s // 128)], dtype=torch.int32).reshape(1, -1)
    q_rope = torch.empty((1, heads, 64), dtype=bf).normal_(mean=0.0, std=0.5)
    k_rope = torch.empty((kv_s // 128, 128, 1, 64), dtype=bf).normal_(mean=0.0, std=0.5)
    if cpp_seed is not None:
        perm, idx = cpp_sfa_inputs(cpp_seed, kv_s, topk, act)
        indices = torch.tensor(np.array(idx, np.int32).reshape(1, 1, topk), dtype=torch.int32)
        table = torch.tensor(np.array(perm, np.int32).reshape(1, -1), dtype=torch.int32)
    q = torch.cat((query.unsqueeze(0), q_rope.unsqueeze(0)), dim=-1)
    kv = torch.cat((key, k_rope), dim=-1)
    aq = torch.tensor([1]).reshape(1).to(torch.int32)
    akv = torch.tensor([act], dtype=torch.int32)
    return (q, kv, indices, aq, akv, table), kv_s // 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", choices=["fa-expert", "fa-auto", "sfa"])
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--S", type=int, default=32768)
    ap.add_argument("--H", type=int, default=12, help="query heads")
    ap.add_argument("--KV-H", type=int, default=1, help="kv heads (divides H; published: 1)")
    ap.add_argument("--file", default="sparse_flash_attn_pa_developer")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--cpp-inputs", type=int, default=None, metavar="SEED")
    ap.add_argument("--lowering", choices=["original", "tilepipe", "both"], default="original",
                    help="the front end's lowering of automatic kernels (docs/python.md); "
                    "both: one line each")
    a = ap.parse_args()
    from tilelang import _jit

    for lowering in ["original", "tilepipe"] if a.lowering == "both" else [a.lowering]:
        _jit.lowering_override[0] = lowering
        run(a, "" if a.lowering == "original" else f" [{lowering}]")


def run(a, tag):
    import numpy as np

    if a.kernel.startswith("fa"):
        rel = ("flash_attention/fa_opt/flash_attn_bhsd_expert_h16_d128.py" if a.kernel == "fa-expert"
               else "flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h16_d128.py")
        mod = load(rel, "fa_mod")
        t0 = time.perf_counter()
        k = mod.flash_attention_fwd(batch=a.B, seq_len=a.S, heads_q=a.H, heads_kv=a.KV_H, dim=128)
        build_s = time.perf_counter() - t0
        q = np.zeros((a.B, a.H, a.S, 128), np.float16)
        kv = np.zeros((a.B, a.KV_H, a.S, 128), np.float16)
        args = [q, kv, kv]
    else:
        mod = load(f"sparse_flash_attention/bench_sfa/{a.file}.py", "sfa_mod")
        args, pages = sfa_inputs(a.cpp_inputs)
        t0 = time.perf_counter()
        if a.file.endswith("_developer"):  # its factory names the arguments differently
            k = mod.sparse_attention_fwd(heads=128, dim=512, tail_dim=64, topk=2048, sm_scale=0.5,
                                         core_num=24, block_num=pages, block_size=128)
        else:
            k = mod.sparse_attention_fwd(q_heads=128, dim=512, rope_dim=64, topk=2048, scale=0.5,
                                         core_num=24, block_size=128)
        build_s = time.perf_counter() - t0
        cycles = k.cycles(*args)
        c = k.last_run[0]
        print(f"sfa{tag} {a.file}{'' if a.cpp_inputs is None else f' (C++ inputs, seed {a.cpp_inputs})'}"
              f": lower {c.lower_s:.3f} s (factory {build_s:.3f} s); simulated {cycles:.0f} "
              f"cycles = {cycles * c.compiled.us_per_cycle:.1f} us on {c.compiled.chip}")
        return
    c = k._compile({})
    ms = k.profile(*args, exact=a.exact)
    cycles = k.last_run[1].cycles
    print(f"{a.kernel}{tag} B={a.B} S={a.S} H={a.H} KV_H={a.KV_H}: lower {c.lower_s:.3f} s (factory {build_s:.3f} s, "
          f"compile {c.compiled.compile_wall_s:.3f} s); simulated {cycles:.0f} cycles = "
          f"{ms * 1000:.1f} us on {c.compiled.chip}")


if __name__ == "__main__":
    main()
