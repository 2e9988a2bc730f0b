"""`tilepipe emit` (issue 29): the compiled program as a TileLang-Ascend expert-mode file.
Checked without an NPU: the emitted file, run back through the front end (its pass configs
switch the original's automatic sync, CV split and planning off), gives the same cycles and
the same outputs as the kernel it came from, and uses only the original's public API."""

import ast
import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from conftest import HERE, ROOT

tilelang = pytest.importorskip("tilelang")
from tilelang._core import _ext, numpy_dtype  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "python", "tools"))
from api_check import api_names, attribute_chains  # noqa: E402
from corpus_emit import GETVALUE_NOTE  # noqa: E402

# Every built-in kernel and variant emit can spell, at small shapes (the run of the original
# and of the emitted file each take seconds at most).
GEMM = {"M": "256", "N": "256", "K": "256"}
FA = {"S": "1024", "H": "2"}
CASES = (
    [("elementwise", v, {"N": "65536"}) for v in ("add", "mul")]
    + [("elementwise", "add", {"N": "65536", "buffers": "3"}), ("softmax", "", {})]
    + [("gemm", v, GEMM) for v in ("naive", "l1_tiling", "double_buffer", "swizzle", "expert")]
    + [("fa", v, FA) for v in ("baseline", "l1_vec", "multibuf", "pipelined", "sync2", "expert")]
    # At S=1024 the auto kernel's batch loop runs once: auto_sync drops the carried waits'
    # guards (`if j_batch >= 1`), as the front end drops a guard decided at build time.
    + [("fa", "auto", {"S": "4096", "H": "2"}), ("fa", "auto", {"S": "1024", "H": "2"})]
    + [("gm_read", v, {"N": "1024"}) for v in ("blocks", "rows128", "nd2nz_l1")]
    # The published bench shape (one token, 128 heads, topk 2048), and causal masks.
    + [("sfa", v, {}) for v in ("baseline", "developer", "pa", "no_cv_pipeline", "auto")]
    + [("sfa", "auto", {"T": "2", "B": "1", "causal": "1", "topk": "512"})]
)


def emit(tmp_path, kernel, variant, params, tag=""):
    path = tmp_path / f"{kernel}_{variant or 'default'}{tag}.py"
    argv = ["tilepipe", "emit", kernel, "-o", str(path)]
    if variant:
        argv += ["--variant", variant]
    for k, v in params.items():
        argv += ["--param", f"{k}={v}"]
    rc, out = _ext.cli_capture(argv + ["--json"])
    assert rc == 0, out
    return path


def load_factory(path, name):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


@pytest.mark.parametrize("kernel,variant,params", CASES,
                         ids=[f"{k}-{v or 'default'}-{'-'.join(p.values())}" for k, v, p in CASES])
def test_round_trip_cycles_and_outputs(tmp_path, kernel, variant, params):
    path = emit(tmp_path, kernel, variant, params)
    factory = load_factory(path, kernel)
    jit = factory()
    cycles, inputs, outputs = _ext.run_registered(kernel, variant, params, True)
    ins = [i for i in range(len(jit.specs)) if i not in jit.out_idx and i not in jit.workspace_idx]
    args = []
    for i in ins:
        name, spec, _ = jit.specs[i]
        # A kernel without generated inputs (gm_read) reads zeros.
        vals = inputs.get(name, np.zeros(int(np.prod(spec.shape))))
        args.append(np.asarray(vals).reshape(spec.shape).astype(numpy_dtype(spec.dtype)))
    # Same program: the same simulated time to the cycle, on the same inputs (SFA's gathers
    # follow its indices) -- unless the file notes tile calls with a buffer-element scalar,
    # which the original's code generator puts behind a full barrier each (GetValue): then
    # the file run as the original compiles it is slower, never faster.
    noted = GETVALUE_NOTE in path.read_text()
    back = jit.cycles(*args)
    assert (back == cycles, back > cycles) == (not noted, noted), (back, cycles, noted)
    # Same program: the IR up to renaming of loop variables. The gemm and fa index
    # expressions hold `x * 1`, `x + 0`, `cid * 0`, which the front end's expression
    # arithmetic folds (as the original's simplifier does): equal up to that folding, which
    # the cycles and values above and below pin down.
    equal = _ext.registered_equal(kernel, variant, params, jit._current().compiled)
    assert equal == (kernel in ("elementwise", "softmax", "gm_read"))
    # Same values: the emitted kernel on the registered kernel's inputs.
    got = jit(*args)
    got = got if isinstance(got, (list, tuple)) else [got]
    outs = [jit.specs[i][0] for i in jit.out_idx]
    assert set(outs) == set(outputs)
    for name, arr in zip(outs, got):
        np.testing.assert_array_equal(np.asarray(arr, dtype=np.float64).ravel(), outputs[name],
                                      err_msg=name)


@pytest.mark.parametrize("kernel,variant,params", [c for c in CASES if c[0] in ("softmax", "fa")],
                         ids=[c[1] or c[0] for c in CASES if c[0] in ("softmax", "fa")])
def test_emitted_file_uses_only_the_original_api(tmp_path, kernel, variant, params):
    path = emit(tmp_path, kernel, variant, params)
    used = attribute_chains(ast.parse(path.read_text()))
    assert "T.annotate_address" in used and "tilelang.jit" in used
    assert used - api_names() == set()


def test_api_check_catches_a_name_outside_the_list():
    used = attribute_chains(ast.parse("T.tile.add(a, b, c)\nT.tile.fused_softmax(a, b)\n"))
    assert used - api_names() == {"T.tile.fused_softmax"}


def test_emit_is_deterministic_and_reads_like_expert_code(tmp_path):
    a = emit(tmp_path, "fa", "auto", {"S": "1024", "H": "2"}).read_text()
    b = emit(tmp_path, "fa", "auto", {"S": "1024", "H": "2"}, tag="_again").read_text()
    assert a == b
    # Loops stay loops, the passes' work is commented, and the flags carry their ids.
    assert "for " in a and "T.serial(" in a
    assert "# auto_sync" in a and "# cv_split" in a
    assert 'with T.Scope("C")' in a and 'with T.Scope("V")' in a
    assert "T.set_cross_flag(" in a and "T.wait_cross_flag(" in a


def test_factory_refuses_other_parameter_values(tmp_path):
    path = emit(tmp_path, "gemm", "expert", {"M": "256", "N": "256", "K": "256"})
    with pytest.raises(AssertionError, match="emitted for .*M=256"):
        load_factory(path, "gemm")(M=512)


def test_kernel_emit_from_a_developer_mode_kernel(tmp_path):
    """kernel.emit(path) on a Python kernel: the passes' output, round-tripped."""
    sys.path.insert(0, HERE)
    from kernels import matmul

    jit = matmul(256, 256, 128, 128, 128, 64)
    path = tmp_path / "mm_expert.py"
    jit.emit(path)
    text = path.read_text()
    assert text.startswith("# Emitted by `tilepipe emit` from matmul(")
    again = load_factory(path, "matmul")()
    assert again.cycles() == jit.cycles()
    a = np.random.default_rng(0).standard_normal((256, 128)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((128, 256)).astype(np.float16)
    np.testing.assert_array_equal(again(a, b), jit(a, b))


def test_emit_refuses_what_has_no_expert_spelling(tmp_path):
    """A compare into a float32 mask (tilepipe's one element per lane) has no spelling in the
    original, whose masks are u8 bits: emit names the op and the line and writes no file."""
    import tilelang.language as T

    @tilelang.jit(out_idx=[1])
    def flags(n=256):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((n,), "float32")
                m = T.alloc_ub((n,), "float32")
                T.copy(A, a)
                T.tile.compare(m, a, 0.0, "GT")
                T.copy(m, Out)

        return main

    path = tmp_path / "flags.py"
    with pytest.raises(Exception, match=r"test_emit\.py:\d+:\d+: error: tile\.compare has no") as e:
        flags().emit(path)
    assert "bit mask" in str(e.value)
    assert not path.exists()


def test_emit_of_a_python_file_through_the_command_line(tmp_path):
    """`tilepipe emit FILE.py:NAME`: the factory keeps NAME and the file's integer arguments."""
    import subprocess


    binary = os.path.join(os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build")),
                          "tilepipe")
    out = tmp_path / "mm_expert.py"
    args = ["M=256", "N=256", "K=128", "bm=128", "bn=128", "bk=64"]
    r = subprocess.run([binary, "emit", os.path.join(HERE, "kernels.py") + ":matmul", "-o",
                        str(out)] + [a for kv in args for a in ("--param", kv)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    sys.path.insert(0, HERE)
    from kernels import matmul

    assert "def matmul(K=128, M=256, N=256, bk=64, bm=128, bn=128):" in out.read_text()
    assert load_factory(out, "matmul")().cycles() == matmul(256, 256, 128, 128, 128, 64).cycles()


# gemm_splitk: its T.tile.atomic_add (a copy with atomic add) must be emitted as one.
CORPUS_EXAMPLES = ["elementwise/elementwise_add.py", "gemm/example_gemm.py",
                   "flash_attention/flash_attn_bhsd.py",  # gemm_v0 with B transposed
                   "reduce/example_reduce_min.py", "gemm_splitk/example_tilelang_gemm_splitk.py"]


def test_corpus_examples_round_trip(tmp_path):
    """python/tools/corpus_emit.py on a few of the original's examples: each kernel the
    script runs, emitted and run back on the script's own inputs, gives the same cycles and
    outputs, and its file uses only the original's API (docs/cli.md, "tilepipe emit")."""

    from conftest import CORPUS, ROOT

    if not os.path.isdir(CORPUS):
        pytest.skip(f"the TileLang-Ascend corpus is not at {CORPUS}")
    sys.path.insert(0, os.path.join(ROOT, "python", "tools"))
    import corpus_emit

    report = corpus_emit.check(CORPUS_EXAMPLES, str(tmp_path), timeout=120,
                               log=lambda *a: None)
    assert [s["script_error"] for s in report["scripts"]] == [""] * len(CORPUS_EXAMPLES)
    rows = report["rows"]
    assert len(rows) >= len(CORPUS_EXAMPLES)
    assert [(r["kernel"], r["status"], r.get("reason", "")) for r in rows if r["status"] != "ok"] == []


def _library_cases():
    """test_ops25's kernels of the original's library ops, with inputs: sort / topk (whose
    -inf padding the front end writes as fills), merge_sort (3 and 4 ways), gather_mask
    (pattern and uint32 forms), gatherb, createvecindex / arith_progression, round, sort32."""
    sys.path.insert(0, HERE)
    import test_ops25 as t

    rng = np.random.default_rng(7)
    lists = [np.stack([np.sort(rng.standard_normal(8))[::-1], np.arange(8) + 10 * w], 1)
             .astype(np.float32).ravel() for w in range(4)]
    return [
        ("sort_topk", t.sort_kernel(96, 70, 10, "float32"),
         [rng.integers(-20, 20, 96).astype(np.float32)]),
        ("merge3", t.merge_kernel(16, 3), lists),
        ("merge4", t.merge_kernel(16, 4), lists),
        ("gather_mask", t.gather_mask_kernel(128, "P1010", "float32"),
         [rng.standard_normal(128).astype(np.float32)]),
        ("gather_mask_u32", t.gather_mask_custom_kernel(64, 8),
         [rng.integers(-9, 9, 64).astype(np.int32), np.array([1, 2, 2, 5, 63, 6, 0, 8], np.uint32)]),
        ("gatherb", t.gatherb_kernel(256, "float16", 2),
         [rng.standard_normal(256).astype(np.float16),
          (rng.integers(0, 16, 16) * 32).astype(np.uint32)]),
        ("index", t.index_kernel(64, 5, "float32"), []),
        ("round", t.round_kernel(64), [rng.standard_normal(64).astype(np.float32) * 4]),
        ("sort32", t.sort32_kernel(64, "float16"),
         [rng.integers(0, 9, 64).astype(np.float16), np.arange(64, dtype=np.uint32)]),
    ]


@pytest.mark.parametrize("case", range(9))
def test_library_ops_round_trip(tmp_path, case):
    """Each library op emitted with the original's spelling comes back to the same program:
    same cycles, same outputs (the sort's padding fills are not written twice)."""
    name, jit, args = _library_cases()[case]
    path = tmp_path / f"{name}.py"
    jit.emit(path)
    text = path.read_text()
    assert ast.parse(text) and attribute_chains(ast.parse(text)) - api_names() == set()
    again = load_factory(path, jit.name)()
    assert again.cycles(*args) == jit.cycles(*args)
    want, got = jit(*args), again(*args)
    want = want if isinstance(want, (list, tuple)) else [want]
    got = got if isinstance(got, (list, tuple)) else [got]
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
