"""The host side of `tilepipe run-py` on Debian's torch (python/tilepipe/host.py): the npu
device on the CPU, torch_npu's golden vendor ops, float16 on the CPU, torch tensors as kernel
arguments (bfloat16 included), scalar kernel parameters, and the original's module surface
(tilelang.jit / autotune / carver / utils.target / cache / engine)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilelang
import tilelang.language as T

from conftest import ROOT
from kernels import double

torch = pytest.importorskip("torch")


def run_py(tmp_path, code):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python"), env.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))])
    return subprocess.run([sys.executable, "-m", "tilepipe", str(path)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)



@tilelang.jit
def scale_in_place(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "bfloat16"), B: T.Tensor((2, N), "bfloat16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "bfloat16")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.muls(x, x, 2.0)
                T.copy(x, B[vid, :])

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_tensors_in_and_out(dtype):
    tdt = getattr(torch, dtype)
    a = torch.randn(2, 64).to(tdt)
    out = double(64, dtype)(a)
    assert isinstance(out, torch.Tensor) and out.dtype == tdt
    torch.testing.assert_close(out, (a.float() * 2).to(tdt))


def test_outputs_are_written_back_into_the_callers_bf16_tensor():
    a = torch.randn(2, 64).to(torch.bfloat16)
    b = torch.zeros(2, 64, dtype=torch.bfloat16)
    scale_in_place(64)(a, b)
    torch.testing.assert_close(b, (a.float() * 2).to(torch.bfloat16))


@tilelang.jit(out_idx=[1])
def add_rows(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32"), n: T.int32,
             s: T.float32):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.muls(x, x, s)
                if vid < n:
                    T.tile.adds(x, x, 1.0)
                T.copy(x, B[vid, :])

    return main


def test_scalar_parameters_specialise_the_kernel_on_their_values():
    a = np.ones((2, 64), np.float32)
    k = add_rows(64)
    np.testing.assert_array_equal(k(a, 1, 2.0)[:, 0], [3.0, 2.0])
    np.testing.assert_array_equal(k(a, 2, 3.0)[:, 0], [4.0, 4.0])
    with pytest.raises(tilelang.TilelangError, match="scalar parameter 'n' is int32; got 1.5"):
        k(a, 1.5, 2.0)


def test_runner_maps_npu_to_the_cpu_and_supplies_torch_npu(tmp_path):
    r = run_py(tmp_path, """
        import torch, torch_npu
        import torch.nn.functional as F
        torch.npu.set_device(0)
        a = torch.randn(4, 8, device="npu").half().npu()
        b = torch.ones(8, 4, dtype=torch.float16).to("npu:0")
        c = a @ b                       # float16 matmul: float32 on the CPU, rounded back
        assert c.dtype == torch.float16 and c.device == torch.device("npu")
        torch.npu.synchronize()
        assert torch.npu.current_device() == 0 and torch.npu.is_available()
        x = torch.randn(3, 8)
        torch.testing.assert_close(torch_npu.npu_swiglu(x), F.silu(x[:, :4]) * x[:, 4:])
        torch.testing.assert_close(torch.ops.npu.npu_swiglu(x), torch_npu.npu_swiglu(x))
        q = torch.randn(1, 2, 4, 8)
        o = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        assert o.shape == q.shape
        e0, e1 = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        e0.record(); e1.record()
        assert e0.elapsed_time(e1) >= 0
        print("host OK", torch.__version__)
        torch_npu.npu_no_such_op(x)
    """)
    assert "host OK" in r.stdout, r.stderr
    assert "torch_npu.npu_no_such_op has no host model" in r.stderr
    assert "script.py:21: error" in r.stderr


def test_gelu_backward_and_rotary_mul_golden_versions():
    sys.path.insert(0, os.path.join(ROOT, "python", "tilepipe", "_host"))
    try:
        import torch_npu
    finally:
        sys.path.pop(0)
    x, dy = torch.randn(16), torch.randn(16)
    xr = x.clone().requires_grad_(True)
    torch.nn.functional.gelu(xr).backward(dy)
    torch.testing.assert_close(torch_npu.npu_gelu_backward(dy, x), xr.grad)
    x = torch.randn(2, 3, 8)
    cos, sin = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    rot = torch.cat((-x[..., 4:], x[..., :4]), -1)
    torch.testing.assert_close(torch_npu.npu_rotary_mul(x, cos, sin), x * cos + rot * sin)
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    ref = torch.softmax(q @ k.transpose(-2, -1) * 0.3, -1) @ v
    out = torch_npu.npu_fusion_attention(q, k, v, 4, input_layout="BNSD", scale=0.3)[0]
    torch.testing.assert_close(out, ref)
    bsh = lambda t: t.transpose(1, 2).reshape(2, 16, 32)  # noqa: E731
    out = torch_npu.npu_fusion_attention(bsh(q), bsh(k), bsh(v), 4, input_layout="BSH",
                                         scale=0.3)[0]
    torch.testing.assert_close(out, bsh(ref))
    # GQA (2 query heads per kv head) and causal, computed one (batch, head) at a time
    kv, vv = k[:, :2], v[:, :2]
    kk, vr = kv.repeat_interleave(2, dim=1), vv.repeat_interleave(2, dim=1)
    sc = (q @ kk.transpose(-2, -1) * 0.3).masked_fill(
        torch.ones(16, 16, dtype=torch.bool).triu(1), float("-inf"))
    out = torch_npu.npu_fusion_attention(q, kv, vv, 4, input_layout="BNSD", scale=0.3,
                                         sparse_mode=2)[0]
    torch.testing.assert_close(out, torch.softmax(sc, -1) @ vr)
    # swi_glu_grad.py passes a gradient of x's shape: aclnnSwiGluGrad reads its first
    # elements in the output's shape (it checks no shape); fewer elements are an error
    x = torch.randn(4, 8)
    g = torch.randn(4, 8)
    with pytest.warns(UserWarning, match=r"grad_output has shape \(4, 8\); npu_swiglu of x "
                      r"\(4, 8\) has shape \(4, 4\): its first 16 elements"):
        got = torch_npu.npu_swiglu_backward(g, x)
    torch.testing.assert_close(got, torch_npu.npu_swiglu_backward(g[:2].reshape(4, 4), x))
    with pytest.raises(tilelang.TilelangError, match=r"grad_output has shape \(2, 4\)"):
        torch_npu.npu_swiglu_backward(torch.randn(2, 4), x)


def test_module_surface_of_the_original():
    import tilelang.jit.adapter  # noqa: F401
    from tilelang.carver.arch.ascend import Ascend
    from tilelang.jit.adapter.libgen import LibraryGenerator  # noqa: F401
    from tilelang.utils.target import determine_platform

    assert callable(tilelang.jit)
    assert determine_platform("A2") == "A2" and determine_platform() in ("A2", "A3")
    hints = tilelang.carver.MatmulTemplate(M=512, N=512, K=256).with_arch(Ascend()) \
        .recommend_hints(topk=4)
    assert len(hints) == 4 and all(512 % h.block[0] == 0 and 256 % h.rstep[0] == 0 for h in hints)
    with pytest.raises(tilelang.TilelangError, match="tilelang.engine.lower .* not supported"):
        tilelang.engine.lower(None)
    k = double(64, "float32")
    tilelang.cache.clear_cache()
    assert double(64, "float32") is not k


def test_autotune_picks_the_fastest_correct_config():
    @tilelang.autotune(configs=[{"block": 16}, {"block": 64}, {"block": 32}],
                       ref_prog=lambda a: a * 2)
    @tilelang.jit(out_idx=[-1])
    def tuned(N, block):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((block,), "float32")
                with T.Scope("V"):
                    for t in T.serial(N // block):
                        T.copy(A[vid, t * block:(t + 1) * block], x)
                        T.tile.muls(x, x, 2.0)
                        T.copy(x, B[vid, t * block:(t + 1) * block])

        return main

    k = tuned(256)
    times = {b: tuned(256, block=b).profile() for b in (16, 32, 64)}
    assert k.config == {"block": min(times, key=times.get)}
    assert k.get_tuner_result() == k.config and k.latency == pytest.approx(min(times.values()))


def test_multi_device_scripts_stop_at_the_line_that_needs_the_devices(tmp_path):
    r = run_py(tmp_path, """
        import multiprocessing as mp
        import shmem

        def worker(rank):
            a = shmem.InitAttr()
            a.my_rank, a.n_ranks = rank, 4
            shmem.aclshmem_init(a)
            print("unreachable")

        ps = [mp.Process(target=worker, args=(r,)) for r in range(2)]
        for p in ps:
            p.start()
        for p in ps:
            p.join()
        print("Kernel Output Match!")
    """)
    assert r.returncode != 0 and "Kernel Output Match!" not in r.stdout
    assert "script.py:8: error: aclshmem_init (rank 0 of 4) needs 4 devices" in r.stderr
    assert r.stderr.count("Traceback") <= 1  # not one per rank


def test_shmem_ops_in_a_kernel_need_several_devices():
    @tilelang.jit
    def put(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "int8"), B: T.Tensor((N,), "int8")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                with T.Scope("V"):
                    T.shmem_put_nbi(B, A, N, 1)

        return main

    with pytest.raises(tilelang.TilelangError, match=r"T.shmem_put_nbi .* needs several devices"):
        put(64)


def test_unsigned_tensors_and_argument_free_kernels_under_the_runner(tmp_path):
    """torch 1.13 has no uint16 / uint32: under the runner they name int16 / int32 and hold
    the unsigned bits; a kernel called without arrays returns torch tensors there."""
    r = run_py(tmp_path, """
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit(out_idx=[-1])
        def invert(N):
            @T.prim_func
            def main(A: T.Tensor((2, N), "uint16"), B: T.Tensor((2, N), "uint16")):
                with T.Kernel(1, is_npu=True) as (cid, vid):
                    x = T.alloc_ub((N,), "uint16")
                    with T.Scope("V"):
                        T.copy(A[vid, :], x)
                        T.tile.bitwise_not(x, x)
                        T.copy(x, B[vid, :])

            return main

        @tilelang.jit(out_idx=[-1])
        def tens(N):
            @T.prim_func
            def main(B: T.Tensor((2, N), "float32")):
                with T.Kernel(1, is_npu=True) as (cid, vid):
                    x = T.alloc_ub((N,), "float32")
                    with T.Scope("V"):
                        T.tile.fill(x, 10.0)
                        T.copy(x, B[vid, :])

            return main

        a = torch.randint(0, 60000, (2, 64), dtype=torch.int32).to(torch.uint16)
        b = invert(64)(a)
        assert b.dtype == torch.uint16 and torch.equal(b, ~a), (b, ~a)
        assert b.element_size() == 2
        t = tens(64)()
        assert isinstance(t, torch.Tensor) and torch.equal(t, torch.full((2, 64), 10.0))
        print("OK")
    """)
    assert r.stdout.strip() == "OK", r.stderr


def test_the_host_mode_reaches_python_functions_and_keeps_its_place(tmp_path):
    """The float16 host mode is torch's C-level function mode: functions written in Python
    (F.silu, len() of a tensor) reach it through torch.overrides' stack helper, and it is
    still installed after them (a float16 matmul, which 1.13's CPU lacks, still works).
    `with torch.device(...)` (torch >= 2.0) runs its block on the host."""
    r = run_py(tmp_path, """
        import torch
        import torch.nn.functional as F

        with torch.device("cpu"):  # torch >= 2.0's default-device block: the host's
            h = torch.randn(4, 8).half()
        assert isinstance(torch.device("npu"), torch.device) and h.device == torch.device("npu")
        assert len(h) == 4
        assert torch.equal(F.silu(h), F.silu(h.float()).half())
        assert (h @ h.T).dtype == torch.float16
        assert torch.equal(F.softmax(h, -1), F.softmax(h.float(), -1).half())
        print("OK")
    """)
    assert r.stdout.strip() == "OK", r.stderr


def test_more_of_newer_torch_under_the_runner(tmp_path):
    """int32 index tensors (torch >= 2.0), F.rms_norm (2.4), the moe permute round trip,
    T.min(...).value, and a located error for an API misuse without a kernel line."""
    r = run_py(tmp_path, """
        import torch
        import torch.nn.functional as F
        import torch_npu
        import tilelang.language as T

        x = torch.arange(10.0)
        idx = torch.tensor([3, 1], dtype=torch.int32)
        assert x[idx].tolist() == [3.0, 1.0]
        x[idx] = 0.0
        assert x[3] == 0 and x[1] == 0
        h = torch.randn(4, 8).half()
        ref = (h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6)).half()
        assert torch.equal(F.rms_norm(h, (8,), eps=1e-6), ref)
        tokens = torch.randn(6, 4)
        ids = torch.randint(0, 3, (6, 2), dtype=torch.int32)
        perm, sidx = torch_npu.npu_moe_token_permute(tokens, ids)
        back = torch_npu.npu_moe_token_unpermute(perm, sidx)  # one row per copy
        assert torch.equal(back, tokens.repeat_interleave(2, 0))
        probs = torch.rand(6, 2)
        summed = torch_npu.npu_moe_token_unpermute(perm, sidx, probs)
        assert torch.allclose(summed, tokens * probs.sum(-1, keepdim=True))
        assert perm[sidx[5].item()].equal(tokens[2])  # token 2's second copy
        # the permute's gradient sums a token's copies in float32 and rounds once: 1 +
        # 2**-11 + 2**-11 is 1 + 2**-10 (float16 adds would round to 1 twice)
        t = torch.ones(1, 2, dtype=torch.float16, requires_grad=True)
        p, _ = torch_npu.npu_moe_token_permute(t, torch.tensor([[0, 1, 2]], dtype=torch.int32))
        p.backward(torch.tensor([[1.0] * 2, [2**-11] * 2, [2**-11] * 2]).half())
        assert t.grad.tolist() == [[1 + 2**-10] * 2], t.grad
        assert T.min(4, 6).value == 4 and T.ceildiv(7, 2).value == 4
        print("OK")
    """)
    assert r.stdout.strip() == "OK", r.stderr


def test_autotune_skips_tuning_when_the_tuned_parameters_are_given_positionally():
    calls = []

    @tilelang.autotune(configs=lambda args, kwargs: [{"block": 16}, {"block": 32}])
    def factory(N, block):
        calls.append((N, block))
        return double(N, "float32")

    factory(64, 32)
    assert calls == [(64, 32)]


def test_sdpa_one_head_at_a_time_equals_the_whole_batch_formula(tmp_path):
    r = run_py(tmp_path, """
        import math, torch
        import torch.nn.functional as F
        q = torch.randn(2, 6, 5, 8)
        k, v = torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
        m = torch.rand(5, 7) > 0.3
        m[:, 0] = True                  # no row fully masked
        kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
        s = (q @ kk.transpose(-2, -1) / math.sqrt(8)).masked_fill(~m, float("-inf"))
        ref = torch.softmax(s, dim=-1) @ vv
        o = F.scaled_dot_product_attention(q, kk, vv, attn_mask=m)
        torch.testing.assert_close(o, ref)
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                                                  enable_gqa=True), ref)
        add = torch.randn(5, 7)
        ref2 = torch.softmax(q @ kk.transpose(-2, -1) / math.sqrt(8) + add, dim=-1) @ vv
        torch.testing.assert_close(F.scaled_dot_product_attention(q, kk, vv, attn_mask=add), ref2)
        print("sdpa OK", tuple(o.shape))
    """)
    assert "sdpa OK (2, 6, 5, 4)" in r.stdout, r.stderr


def test_int32_class_indices_for_cross_entropy_as_on_the_npu(tmp_path):
    """torch_npu's cross_entropy / nll_loss take int32 targets (the corpus's cross entropy
    example); the host widens them to the int64 CPU torch requires."""
    r = run_py(tmp_path, """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        x = torch.randn(5, 7)
        y = torch.randint(0, 7, (5,))
        want = F.cross_entropy(x, y, reduction="none")
        got = nn.CrossEntropyLoss(reduction="none")(x, y.to(torch.int32))
        assert torch.equal(got, want)
        assert torch.equal(F.nll_loss(x.log_softmax(-1), y.int()), F.nll_loss(x.log_softmax(-1), y))
        print("OK")
    """)
    assert r.stdout.strip() == "OK", r.stderr


def test_bfloat16_ops_cpu_torch_lacks_and_int32_index_tensors_as_torch_npu_takes_them(tmp_path):
    """CPU torch 1.13 has no bfloat16 mish / mse_loss and takes only int64 index tensors in
    gather, scatter, take, take_along_dim, index_fill / copy / put and one_hot; torch_npu has
    both. The host computes the former in float32 and rounds once, and widens only the index
    argument (an int32 scatter keeps its int32 destination and source)."""
    r = run_py(tmp_path, """
        import torch
        import torch.nn.functional as F
        x = torch.randn(4, 8)
        b = x.bfloat16()
        m = F.mish(b); assert m.dtype == torch.bfloat16 and torch.equal(m, F.mish(b.float()).bfloat16()), m
        l = F.mse_loss(b, b * 2); assert l.dtype == torch.bfloat16
        h = F.mish(x.half()); assert h.dtype == torch.float16
        i32 = torch.tensor([0, 2, 1], dtype=torch.int32)
        ix = i32[:, None].expand(3, 8)
        assert torch.equal(torch.gather(x, 0, ix), x[i32.long()])
        assert torch.equal(x.gather(0, ix), x[[0, 2, 1]])
        s = torch.zeros(4, 8).scatter_(0, ix, 1.0); assert s.sum() == 24
        s2 = torch.zeros(4, 8, dtype=torch.int32).scatter_(0, ix, torch.ones(3, 8, dtype=torch.int32)); assert s2.dtype == torch.int32 and s2.sum() == 24
        assert torch.equal(torch.take(x, i32), x.flatten()[[0, 2, 1]])
        assert torch.equal(torch.take_along_dim(x, ix, 0), x[[0, 2, 1]])
        assert F.one_hot(i32, 4).shape == (3, 4)
        y = x.clone(); y.index_fill_(0, i32, 1.0); assert (y[[0,1,2]] == 1).all()
        y = x.clone(); y.index_copy_(0, i32, x[:3]); 
        y = x.clone(); y.index_put_((i32,), torch.zeros(3, 8)); assert (y[:3] == 0).all()
        print("OK")
    """)
    assert r.stdout.strip() == "OK", r.stderr


def test_a_python_int_out_of_an_integer_tensors_range_is_stored_as_its_bits(tmp_path):
    """torch_npu's fill casts a Python int into an integer tensor on the device (a byte of
    bits 255 into int8 is -1: the language suite's int8 compare masks); CPU torch refuses
    ("value cannot be converted to type int8_t without overflow"). A float, or a value in
    range, is stored as before."""
    r = run_py(tmp_path, """
        import torch
        c = torch.zeros(4, dtype=torch.int8, device="npu")
        c[0] = 255; c[1] = 128; c[2] = -129; c[3] = 5
        assert c.tolist() == [-1, -128, 127, 5], c
        d = torch.zeros(2, dtype=torch.int32)
        d[0] = 2 ** 32 + 3; d[1] = 2 ** 31
        assert d.tolist() == [3, -2 ** 31], d
        print("OK")
    """)
    assert r.stdout.strip() == "OK", r.stderr


def test_float16_products_and_exp_on_the_host_match_the_kernel_bit_for_bit(tmp_path):
    """On the board a script's reference `a @ b` of float16 tensors runs on the same Cube as
    the kernel it checks, so the corpus's gdn examples compare them at 1e-5. The host computes
    such products with the simulator's Cube arithmetic (one K fractal at a time into float32),
    so they agree bit for bit however the kernel splits K; float32 exp is correctly rounded on
    both sides (the simulator used glibc's expf, 0.502 ulp)."""
    r = run_py(tmp_path, f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import torch
        from kernels import matmul, unary

        torch.manual_seed(0)
        for dt in (torch.float16, torch.bfloat16):
            a, b = torch.randn(256, 256).to(dt), torch.randn(256, 256).to(dt)
            c = matmul(256, 256, 256, 128, 128, 64, dtype=str(dt)[6:])(a, b)
            for ref in (a @ b, torch.matmul(a, b), torch.mm(a, b), torch.einsum("mk,kn->mn", a, b),
                        torch.einsum("mk,nk->mn", a, b.t().contiguous()),
                        torch.bmm(a[None], b[None])[0], torch.matmul(a[:4], b)):
                assert ref.dtype == dt and torch.equal(c[:ref.shape[0]], ref), \\
                    int((c[:ref.shape[0]] != ref).sum())
        x = torch.randn(16, 2048) * 4
        y = unary(16, 2048, "exp")(x)
        assert torch.equal(y, torch.exp(x)), int((y != torch.exp(x)).sum())
        print("OK")
    """)
    assert r.stdout.strip() == "OK", r.stdout + r.stderr


def test_a_captured_graph_replays_its_kernel_launches_on_the_same_tensors(tmp_path):
    """torch.npu.graph (rms_rope_aclgraph): launches inside the capture are recorded (their
    outputs allocated, undefined until the replay) and run by replay() on the tensors as they
    are then; a torch compute op inside the capture, which the NPU would replay and the host
    ran once, is refused at its line."""
    r = run_py(tmp_path, """
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit(out_idx=[-1])
        def double():
            @T.prim_func
            def main(A: T.Tensor((2, 64), "float32"), B: T.Tensor((2, 64), "float32")):
                with T.Kernel(1, is_npu=True) as (cid, vid):
                    x = T.alloc_ub((1, 64), "float32")
                    with T.Scope("V"):
                        T.copy(A[vid, 0], x)
                        T.barrier_all()
                        T.tile.mul(x, x, 2.0)
                        T.barrier_all()
                        T.copy(x, B[vid, 0])
            return main

        k = double()
        a = torch.ones(2, 64)
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            b = k(a.view(2, 64))
        a.fill_(3.0)
        g.replay()
        assert torch.equal(b, torch.full((2, 64), 6.0)), b
        print("replayed")
        with torch.npu.graph(torch.npu.NPUGraph()):
            c = a * 2  # MARK
    """)
    assert r.stdout.strip() == "replayed", r.stderr
    assert "script.py:30: error: torch.mul inside a torch.npu.graph capture" in r.stderr, r.stderr


def test_loading_an_ahead_of_time_kernel_library_is_a_located_error(tmp_path):
    """gemm_aot/test_example_gemm.py loads the library bisheng would have built: a clear
    error at the line under run-py; a library that exists still loads."""
    r = run_py(tmp_path, """
        import ctypes
        import ctypes.util
        ctypes.CDLL(ctypes.util.find_library("m"))  # a system library: loads
        lib = ctypes.CDLL("./kernel_lib.so")
    """)
    assert r.returncode == 2, r.stderr
    assert ("script.py:5: error: loading the kernel library ./kernel_lib.so is not supported "
            "by tilepipe: no such file") in r.stderr, r.stderr


def test_running_out_of_host_memory_is_an_error_at_the_line(tmp_path):
    """The runner caps the address space at RAM + swap (here 3 GB by the variable): a host
    tensor past it fails at the script's line, not by the kernel's out-of-memory kill."""
    path = tmp_path / "script.py"
    path.write_text("import torch\nx = torch.zeros(1024, 1024)\ny = torch.zeros(2**31)\n")
    env = dict(os.environ, TILEPIPE_MEMORY_LIMIT_GB="3")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python"), env.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))])
    r = subprocess.run([sys.executable, "-m", "tilepipe", str(path)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "script.py:3: error: the host ran out of memory" in r.stderr, r.stderr
    assert "(3.0 GB, the address space tilepipe run-py allows" in r.stderr, r.stderr


def test_running_the_npu_profiler_is_an_error_at_the_line(tmp_path):
    """fa_opt/run.py benchmarks through msprof: without one, its call is a located error."""
    r = run_py(tmp_path, """
        import subprocess
        subprocess.run("true", shell=True, check=True)  # other commands still run
        subprocess.Popen('msprof --output=out --application="python3 x.py"', shell=True)
    """)
    assert r.returncode == 2, r.stderr
    assert ("script.py:4: error: running msprof (the NPU's profiler) is not supported by "
            "tilepipe") in r.stderr, r.stderr


def test_assert_close_of_large_tensors_runs_in_chunks_with_the_same_verdict(tmp_path):
    """torch.testing.assert_close under the runner compares a large pair a chunk at a time
    (its CPU temporaries were GBs beside rms_norm's outputs); a pair that differs gets torch's
    own message for the whole tensors: the global count and index of the mismatch."""
    r = run_py(tmp_path, """
        import resource
        import torch
        n = 16 << 20
        a = torch.randn(n)
        b = a.clone()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        torch.testing.assert_close(a, b)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print("grew MiB", grew >> 10)
        b[n - 3] += 1.0
        try:
            torch.testing.assert_close(a.reshape(4096, -1), b.reshape(4096, -1))
        except AssertionError as e:
            print("MISMATCH", str(e).replace("\\n", " | "))
    """)
    assert r.returncode == 0, r.stderr
    grew = int(r.stdout.split("grew MiB")[1].split()[0])
    assert grew < 128, r.stdout  # unchunked: some 36 bytes an element, 576 MiB
    assert "Mismatched elements: 1 / 16777216" in r.stdout, r.stdout
    assert "at index (4095, 4093)" in r.stdout, r.stdout
