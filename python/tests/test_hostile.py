"""Regression tests of issue 26 on the Python side (the C++ CLI ones: tests/hostile_test.cc).

Each runs a small TileLang script through `tilepipe run-py` in a subprocess (a crash is a
failed test, not the end of the session) and fails on the tree before the fixes (04e0982).
"""

import textwrap

import fuzz_support as fz

# A kernel with one extra UB buffer `big` of shape BIG, copied into when USED.
SCRIPT = '''
import sys
import numpy as np
import tilelang
import tilelang.language as T

M, N, dtype = 16, 64, "float32"
BIG, USED, ARG = {big!r}, {used!r}, {arg!r}


@tilelang.jit(out_idx=[-1])
def k():
    h = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((h, N), dtype)
            if BIG:
                big = T.alloc_ub(BIG, dtype)
            with T.Scope("V"):
                T.copy(A[vid * h:(vid + 1) * h, :], a)
                if USED:
                    T.copy(a[0:2, 0:16], big[0:2, 0:16])
                T.copy(a, C[vid * h:(vid + 1) * h, :])
    return main


try:
    kern = k()
    x = np.ones((M, N), dtype=dtype)
    if ARG == "object":  # what a list of mixed Python values becomes
        x = x.astype(object)
        x[0, 0] = object()
    c = kern(x)
except tilelang.TilelangError as e:
    print(str(e).splitlines()[0], file=sys.stderr)
    sys.exit(2)
print("ok", float(np.asarray(c).sum()))
'''


def run_script(big=None, used=False, arg="float32"):
    fz.need_binary()
    with fz.Sandbox() as box:
        script = box.write("kern.py", SCRIPT.format(big=big, used=used, arg=arg))
        o = fz.run([fz.TILEPIPE, "run-py", script], box, inputs=[script])
    assert not o.violations, f"{o.violations}\nreproduce: {o.repro()}\nstderr: {o.stderr}"
    return o


def test_the_script_itself_runs():
    """The harness is sound: without a hostile input the kernel runs and copies A to C."""
    o = run_script()
    assert o.rc == 0 and "ok 1024.0" in o.stdout, o.stderr


def test_used_ub_buffer_whose_bytes_overflow_int64_is_bad_shape_not_a_crash():
    # Issue 26 #1: T.alloc_ub((1 << 32, 1 << 32)) + a copy into it segfaulted in sim::execute.
    o = run_script(big=(1 << 32, 1 << 32), used=True)
    assert o.rc == 2 and "bad-shape" in o.stderr, o.stderr
    assert "2^48" in o.stderr or "256 TiB" in o.stderr, "the message names the limit"


def test_unused_ub_buffer_whose_bytes_overflow_int64_is_refused_not_zero_bytes():
    # Issue 26 #1: unused, the same buffer wrapped to 0 bytes and the kernel ran.
    o = run_script(big=(1 << 32, 1 << 32), used=False)
    assert o.rc == 2 and "bad-shape" in o.stderr, o.stderr


def test_buffer_extent_past_int64_is_bad_shape_not_a_binding_type_error():
    # Issue 26 #1: an extent past int64 reached pybind as a raw "incompatible function
    # arguments" TypeError.
    o = run_script(big=(10 ** 20, 64), used=False)
    assert o.rc == 2 and "bad-shape" in o.stderr, o.stderr


def test_object_dtype_numpy_argument_is_a_tilelang_error():
    # Issue 26 #6: an object-dtype argument raised numpy's raw TypeError (exit 1, traceback).
    o = run_script(arg="object")
    assert o.rc == 2, o.stderr
    assert "dtype object" in o.stderr and "numeric" in o.stderr, textwrap.shorten(o.stderr, 400)


# ---- issue 46: a verb that runs user code exits 0 only with a checked result -------------

FACTORY = '''
import os, sys, threading
import numpy as np
import tilelang
import tilelang.language as T
{imp}


@tilelang.jit(out_idx=[-1])
def double(N=64):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.muls(x, x, 2.0)
                T.copy(x, B[{row}, :])

    return main
'''


def run_factory(argv, imp="", row="vid", codes=(0, 2, 3), extra=None):
    """`tilepipe VERB kern.py:double ARGV...` with `imp` at the file's top level."""
    fz.need_binary()
    with fz.Sandbox() as box:
        script = box.write("kern.py", FACTORY.format(imp=imp, row=row))
        for name, text in (extra or {}).items():
            box.write(name, text)
        o = fz.run([fz.TILEPIPE] + [a.replace("KERN", script) for a in argv], box,
                   inputs=[script], codes=codes, env={"TILEPIPE_TORCH": "shim"})
    assert not o.violations, f"{o.violations}\nreproduce: {o.repro()}\nstderr: {o.stderr}"
    return o


def test_the_factory_itself_checks():
    o = run_factory(["check", "KERN:double"])
    assert o.rc == 0 and "no race or deadlock" in o.stdout, o.stderr


def test_a_process_exit_in_user_code_is_never_exit_0():
    # Issue 46: os._exit(0) at import made check / profile / tune exit 0 having checked
    # nothing; every way of ending the process without unwinding is the same class.
    for imp, verb in (
            ("os._exit(0)", ["check", "KERN:double"]),
            ("import posix\nposix._exit(0)", ["profile", "KERN:double", "--json"]),
            ("threading.Thread(target=lambda: os._exit(0)).start()\nimport time\n"
             "time.sleep(5)", ["tune", "KERN:double", "--space", "N=32,64", "--no-cache"])):
        o = run_factory(verb, imp=imp)
        assert o.rc == 2, (imp, verb, o.rc, o.stderr)
        assert "ended the process" in o.stderr and "nothing was run or checked" in o.stderr


def test_an_exit_hook_after_the_command_keeps_the_commands_result():
    # The result is handed over before the interpreter's exit: an atexit os._exit(0) of
    # the user's cannot turn a finding into a success, nor a success into a failure.
    o = run_factory(["check", "KERN:double"], imp="import atexit\natexit.register(os._exit, 0)")
    assert o.rc == 0, o.stderr
    o = run_factory(["check", "KERN:double"], row="0",
                    imp="import atexit\natexit.register(os._exit, 0)")
    assert o.rc == 3, o.stderr


def test_an_exception_of_the_users_code_is_located_in_the_users_file():
    # Issue 46: a raw "kern.py:double: RecursionError: ..." (or numpy's ValueError) without
    # the line that raised it; now file:line: error: ... with a hint, exit 2.
    for imp, what in (("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
                      ("np.zeros((2, 2)).reshape(3)", "ValueError")):
        o = run_factory(["check", "KERN:double"], imp=imp)
        assert o.rc == 2, o.stderr
        line = next(ln for ln in o.stderr.splitlines() if what in ln)
        assert "kern.py:" in line and ": error: " in line and "hint:" in o.stderr, o.stderr


def test_an_output_may_not_replace_the_kernels_file_or_a_module_it_imports():
    # Issue 46: --trace / --html / -o naming the kernel's own .py (or a module it imports,
    # through any path: a symlink, ../) overwrote it with exit 0.
    imp = "import helper"
    extra = {"helper.py": "X = 1\n"}
    for argv in (["run", "KERN:double", "--trace", "helper.py"],
                 ["profile", "KERN:double", "--html", "./sub/../kern.py"],
                 ["emit", "KERN:double", "-o", "helper.py"]):
        o = run_factory(argv, imp=imp, extra=dict(extra, **{"sub/x": ""}))
        assert o.rc == 2 and "destroy an input" in o.stderr, (argv, o.rc, o.stderr)


def test_a_run_time_division_by_zero_in_an_index_is_an_error_at_its_line():
    # Issue 46: `x // 0` in an index evaluated to 0 and the run went on.
    o = run_factory(["run", "KERN:double"], row="vid // cid")
    assert o.rc == 2 and "division-by-zero" not in o.stdout, o.stderr
    line = next(i for i, ln in enumerate(FACTORY.splitlines(), 1) if "T.copy(x, B[" in ln)
    assert f"kern.py:{line}:" in o.stderr and "division or modulo by zero" in o.stderr, o.stderr


def test_an_unusable_tune_cache_degrades_to_no_cache_with_a_warning():
    # Issue 46: an unwritable cache aborted the search (exit 1 / 2).
    o = run_factory(["tune", "KERN:double", "--space", "N=32,64", "--cache-dir", "cache.txt",
                     "--json"], extra={"cache.txt": "a file in the way\n"})
    assert o.rc == 0, o.stderr
    assert "without a cache" in o.stderr and "cache_warning" in o.doc, o.stderr


ANCHORS = ('{"sources": {"s": {"citation": "c", "protocol": {"l2": "cold", "launch": '
           '"excluded", "timer": "t", "evidence": "e"}}}, "anchors": [%s]}')
ANCHOR = ('{"name": "a", "set": "calibration", "kernel": "gemm", "params": {"M": 64, '
          '"N": 64, "K": 64}, "measured_us": %s, "source": "s"}')


def test_anchor_files_empty_duplicated_or_absurd_are_refused():
    # Issue 46: empty files were raw json exceptions, duplicate keys and empty anchor lists
    # were taken silently, and 1e308 us was accepted (an error of inf %).
    fz.need_binary()
    cases = {"": "the file is empty",
             ANCHORS % "": "is empty",
             ANCHORS % ANCHOR.replace('"set": "calibration"',
                                      '"set": "calibration", "set": "validation"') % 10:
                 "given twice",
             ANCHORS % (ANCHOR % "1e308"): "not a plausible kernel time",
             ANCHORS % (ANCHOR % "1e-9"): "not a plausible kernel time"}
    for text, want in cases.items():
        with fz.Sandbox() as box:
            box.write("a.json", text)
            o = fz.run([fz.TILEPIPE, "fidelity", "--anchors", "a.json"], box,
                       env={"TILEPIPE_NO_PYTHON": "1"})
        assert not o.violations, (o.violations, o.stderr)
        assert o.rc == 2 and want in o.stderr, (text, o.rc, o.stderr)


def test_a_non_finite_percentage_is_refused():
    # Issue 46: `--tolerance-pct nan` passed CLI11's range check (NaN compares false) and
    # turned every comparison into a failure.
    fz.need_binary()
    for v in ("nan", "inf", "-1", "101"):
        with fz.Sandbox() as box:
            o = fz.run([fz.TILEPIPE, "differential", "gemm", "--tolerance-pct", v], box)
        assert not o.violations and o.rc == 2 and "[0, 100]" in o.stderr, (v, o.stderr)


PARTIAL = '''
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1], pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True})
def part(R=2):
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
        with T.Kernel(R, is_npu=True) as (cid, vid):
            x = T.alloc_ub((64,), "float32")
            with T.Scope("V"):
                T.copy(A[cid * 2 + vid, :], x)
                T.tile.muls(x, x, 2.0)
                T.copy(x, B[cid * 2 + vid, :])

    return main
'''


def test_tune_rejects_a_config_that_leaves_outputs_unwritten():
    # Issue 46: `tune` of a Python factory ranked configurations that leave outputs
    # unwritten (R=1 launches half the blocks: rows 2 and 3 of B stay as they were, and the
    # run is faster for doing less). Each config's functional run now holds it to the
    # outputs the starting config (R=2) writes.
    fz.need_binary()
    with fz.Sandbox() as box:
        script = box.write("kern.py", PARTIAL)
        o = fz.run([fz.TILEPIPE, "tune", f"{script}:part", "--space", "R=1,2", "--no-cache",
                    "--json"], box, inputs=[script], codes=(0,), env={"TILEPIPE_TORCH": "shim"})
    assert not o.violations, f"{o.violations}\nreproduce: {o.repro()}\nstderr: {o.stderr}"
    configs = {c["params"]["R"]: c for c in o.doc["configs"]}
    assert configs[1]["status"] == "rejected", configs
    assert "128 of the 256 elements of output 'B' unwritten" in configs[1]["reason"], configs[1]
    assert configs[2]["status"] == "simulated", configs
    assert o.doc["best"]["params"]["R"] == 2, o.doc["best"]
