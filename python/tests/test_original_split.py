"""The original lowering's C/V split through the front end (the original_split pass,
docs/passes.md): statements the pass must read as the source's (a macro that returns, a
copy made by a helper inside a binding), T.sync_all's cross-core flags, and a binding read in
a later stage of a cross-core pipeline."""

import numpy as np

import tilelang
import tilelang.language as T


def rand(*shape):
    return np.random.default_rng(1).random(shape).astype(np.float32)


@T.macro
def first_row(vid, rows):
    r0 = vid * rows
    return r0


def to_workspace(src, dst):
    T.copy(src, dst)
    return 0


@tilelang.jit(out_idx=[2], workspace_idx=[3])
def matmul_rows(mode):
    """C = A @ B: the Cube's product handed to the Vector cores through W, each AIV copying
    its 8 rows. mode "macro": the rows come from a macro that returns; "helper": the copy
    into W is made by a plain helper whose result is bound; "sync": T.sync_all between."""

    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
             C: T.Tensor((16, 16), "float32"), W: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((16, 16), "float16")
            b_l1 = T.alloc_L1((16, 16), "float16")
            c_l0 = T.alloc_L0C((16, 16), "float32")
            x = T.alloc_ub((8, 16), "float32")
            T.copy(A, a_l1)
            T.copy(B, b_l1)
            T.gemm_v0(a_l1, b_l1, c_l0, init=True)
            done = 0
            if mode == "helper":
                done = to_workspace(c_l0, W)
            else:
                T.copy(c_l0, W)
            if mode == "sync":
                T.sync_all()
            r = first_row(vid, 8) + done
            T.copy(W[r, 0], x)
            T.copy(x, C[r, 0])

    return main


def test_statements_the_split_reads_as_the_sources(monkeypatch):
    a, b = (rand(16, 16) * 0.3).astype(np.float16), (rand(16, 16) * 0.3).astype(np.float16)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    for mode in ("macro", "helper"):
        k = matmul_rows(mode)
        np.testing.assert_allclose(k.check(a, b), ref, rtol=1e-2, atol=1e-2)  # race-free
        ir = k.get_ir(True, a, b)
        assert "scope C" in ir and "scope V" in ir and "wait_cross_flag #0" in ir, mode
    # T.sync_all keeps its barrier of every core (under a build-time `if` too): a mode-3 set
    # and its wait on each core. Its drain's flags make both scopes hand-synced, so the run
    # is not race-checked here (automatic sync leaves such scopes to the author).
    monkeypatch.setenv("TILEPIPE_NO_CHECK", "1")
    k = matmul_rows("sync")
    np.testing.assert_allclose(k(a, b), ref, rtol=1e-2, atol=1e-2)
    ir = k.get_ir(True, a, b)
    assert ir.count("mode=3") == 2 and ir.count("wait_cross_flag #15") == 2, ir


@tilelang.jit(out_idx=[3], workspace_idx=[4])
def gathered_rows(N):
    """Per tile i: the Vector loads an index (stage V1), the Cube multiplies into W (stage
    C), the Vector reads W's rows from that index (stage V2) through a binding."""

    @T.prim_func
    def main(A: T.Tensor((N, 16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
             Idx: T.Tensor((N, 8), "int32"), C: T.Tensor((N, 8, 16), "float32"),
             W: T.Tensor((N, 16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((16, 16), "float16")
            b_l1 = T.alloc_L1((16, 16), "float16")
            c_l0 = T.alloc_L0C((16, 16), "float32")
            x = T.alloc_ub((4, 16), "float32")
            idx_ub = T.alloc_ub((8,), "int32")
            T.copy(B, b_l1)
            for i in T.Pipelined(N, num_stages=2):
                T.copy(Idx[i, 0], idx_ub)
                T.copy(A[i, :, :], a_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, W[i, :, :])
                j = idx_ub[0]
                T.copy(W[i, j + vid * 4, 0], x)
                T.copy(x, C[i, vid * 4, 0])

    return main


def test_a_binding_read_in_a_later_stage_sees_its_own_iterations_value():
    # idx_ub is written in the first Vector stage and read (through `j`) in the second: it
    # needs a version per iteration of the batch, or every iteration reads the last index.
    n = 4
    a = (rand(n, 16, 16) * 0.3).astype(np.float16)
    b = (rand(16, 16) * 0.3).astype(np.float16)
    idx = np.zeros((n, 8), np.int32)
    idx[:, 0] = [0, 8, 3, 5]
    k = gathered_rows(n)
    c = k.check(a, b, idx)
    s = a.astype(np.float32) @ b.astype(np.float32)
    ref = np.stack([s[t, idx[t, 0]:idx[t, 0] + 8] for t in range(n)])
    np.testing.assert_allclose(c, ref, rtol=1e-2, atol=1e-2)
    assert "idx_ub: UB i32[2, 8]" in k.get_ir(True, a, b, idx)
