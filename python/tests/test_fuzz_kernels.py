"""Fuzzer of the Python front end: small random TileLang kernels (Vector elementwise and
reductions with T.Parallel, copies with slices, allocations of random and hostile shapes
and dtypes) run through `tilepipe run-py` in a subprocess, so a crash is a finding, not
the end of the test session (issue 26)."""

import json

from hypothesis import strategies as st

import fuzz_support as fz

GOOD_DTYPES = ["float32", "float16"]
BAD_DTYPES = ["float64", "float8_e4m3", "", "complex64", "float8", "int4"]
# UB tile extents; hostile ones: empty, negative, odd, and byte sizes past int64.
ROWS = [2, 4, 8, 16]
COLS = [16, 32, 64, 128]
BAD_EXTENTS = [0, -16, 3, 1 << 32, 1 << 62, 10 ** 20]
BINOPS = ["+", "-", "*", "T.max", "T.min"]
UNOPS = ["T.exp", "T.abs", "-", "T.relu"]

# The script: builds the kernel, times it (summary: the invariants), runs it on values and
# compares with numpy. A front-end error is exit 2 with its one-line message; anything else
# propagates (a traceback, exit 1): a raw exception is a finding.
DRIVER = '''
import json, sys
import numpy as np
import tilelang
import tilelang.language as T

M, N, dtype = {M}, {N}, {dtype!r}


@tilelang.jit(out_idx=[-1])
def k():
    h = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((h, N), dtype)
            b = T.alloc_ub((h, N), dtype)
{extra_alloc}
            with T.Scope("V"):
                T.copy(A[vid * h:(vid + 1) * h, :], a)
                T.copy(B[vid * h:(vid + 1) * h, :], b)
{body}
                T.copy(a, C[vid * h:(vid + 1) * h, :])
    return main


try:
    kern = k()
    summary = kern.summary()
    rng = np.random.default_rng(1)
    a = rng.uniform(-2, 2, (M, N)).astype(dtype)
    b = rng.uniform(0.5, 2, (M, N)).astype(dtype)
    c = kern(a, b)
except tilelang.TilelangError as e:
    print(str(e).splitlines()[0], file=sys.stderr)
    sys.exit(2)
x, y = a.astype(np.float64), b.astype(np.float64)
{reference}
tol = 1e-3 if dtype == "float32" else 2e-2
err = float(np.max(np.abs(np.asarray(c, dtype=np.float64) - ref) / (1 + np.abs(ref))))
print(json.dumps({{"summary": summary, "max_rel_err": err, "ok": err <= tol}}))
'''

NP = {"+": "{} + {}", "-": "{} - {}", "*": "{} * {}", "T.max": "np.maximum({}, {})",
      "T.min": "np.minimum({}, {})", "T.exp": "np.exp({})", "T.abs": "np.abs({})",
      "T.relu": "np.maximum({}, 0)"}


@st.composite
def expressions(draw, depth=2):
    """(T.Parallel expression over a[i, j], b[i, j], numpy expression over x, y)."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        leaf = draw(st.sampled_from(["a", "b", "c"]))
        if leaf == "c":
            c = draw(st.sampled_from([0.5, 2.0, -1.0]))
            return repr(c), repr(c)
        return f"{leaf}[i, j]", {"a": "x", "b": "y"}[leaf]
    op = draw(st.sampled_from(BINOPS + UNOPS))
    if op in UNOPS:
        if op == "T.exp":  # keep exp's argument small: the test is of the lowering
            return "T.exp(a[i, j])", "np.exp(x)"
        e, r = draw(expressions(depth - 1))
        return (f"-({e})", f"-({r})") if op == "-" else (f"{op}({e})", NP[op].format(r))
    (e1, r1), (e2, r2) = draw(expressions(depth - 1)), draw(expressions(depth - 1))
    if op.startswith("T."):
        return f"{op}({e1}, {e2})", NP[op].format(r1, r2)
    return f"({e1} {op} {e2})", f"({NP[op].format(r1, r2)})"


@st.composite
def kernels(draw):
    """(source, description, flags): flags say which known defect classes the case is in."""
    M = fz.pick(draw, ROWS, BAD_EXTENTS[:3], 0.1)
    N = fz.pick(draw, COLS, BAD_EXTENTS[:3], 0.1)
    dtype = fz.pick(draw, GOOD_DTYPES, BAD_DTYPES, 0.1)
    form = draw(st.sampled_from(["parallel", "tile", "reduce", "slice"]))
    ind = " " * 16
    if form == "parallel":
        e, r = draw(expressions())
        body = f"{ind}for i, j in T.Parallel(h, N):\n{ind}    a[i, j] = {e}"
        reference = f"ref = {r}"
    elif form == "tile":
        op = draw(st.sampled_from(["add", "mul", "max", "min", "sub"]))
        body = f"{ind}T.tile.{op}(a, a, b)"
        npop = {"add": "x + y", "mul": "x * y", "max": "np.maximum(x, y)",
                "min": "np.minimum(x, y)", "sub": "x - y"}[op]
        reference = f"ref = {npop}"
    elif form == "reduce":  # row sums into column 0, the rest of a left as copied
        red = draw(st.sampled_from(["sum", "max"]))
        body = (f"{ind}r = T.alloc_ub((h,), dtype)\n{ind}T.reduce_{red}(a, r, dim=-1)\n"
                f"{ind}for i, j in T.Parallel(h, N):\n{ind}    a[i, j] = a[i, j] - r[i]")
        reference = f"ref = x - np.{red}(x, axis=-1, keepdims=True)"
    else:  # copy a column slice of b over a
        lo = draw(st.sampled_from([0, 16, 32]))
        hi = draw(st.sampled_from([16, 32, 64, N]))
        body = f"{ind}T.copy(b[:, {lo}:{hi}], a[:, {lo}:{hi}])"
        reference = f"ref = x.copy(); ref[:, {lo}:{hi}] = y[:, {lo}:{hi}]"
    # An extra UB buffer, sometimes of a hostile shape, sometimes written (a sliced copy).
    shape, used = None, False
    if draw(st.booleans()):
        shape = (fz.pick(draw, [16, 64], BAD_EXTENTS, 0.5), fz.pick(draw, [64], BAD_EXTENTS, 0.5))
        used = draw(st.booleans())
    return make_case(M, N, dtype, form, body, reference, shape, used)


def make_case(M, N, dtype, form, body, reference, shape=None, used=False):
    extra, flags = "", set()
    if shape:
        extra = f"            big = T.alloc_ub({shape!r}, dtype)"
        if used:
            body += f"\n{' ' * 16}T.copy(a[0:2, 0:16], big[0:2, 0:16])"
        if min(shape) <= 0 or shape[0] * shape[1] >= 1 << 60:
            flags.add("bad-shape")  # must be refused, used or not
    src = DRIVER.format(M=M, N=N, dtype=dtype, extra_alloc=extra, body=body,
                        reference=reference)
    return src, f"M={M} N={N} {dtype} {form} extra={extra.strip()!r}", frozenset(flags)


# The reproducer of issue 26 item 1: T.alloc_ub((1 << 32, 1 << 32)) and a copy into it.
OVERFLOW = make_case(16, 64, "float32", "tile", " " * 16 + "T.tile.add(a, a, b)", "ref = x + y",
                     (1 << 32, 1 << 32), True)


@fz.fuzz_test(kernels(), ci=20, explicit=[OVERFLOW])
def test_random_kernels(case, log):
    """A random small kernel: built, timed and run, or refused with a clear exit-2 error;
    never a crash, a raw exception, a broken invariant or a wrong result."""
    src, desc, flags = case
    with fz.Sandbox() as box:
        script = box.write("kern.py", src)
        o = fz.run([fz.TILEPIPE, "run-py", script], box, inputs=[script])
        if o.rc == 0:
            try:
                res = json.loads(o.stdout.strip().splitlines()[-1])
                o.violations += fz.timed_invariants(res["summary"])
                if not res["ok"]:
                    o.violations.append(fz.Violation("wrong", f"result differs from numpy: "
                                                     f"max rel err {res['max_rel_err']:.3g}"))
            except (ValueError, IndexError, KeyError) as ex:
                o.violations.append(fz.Violation("json", f"no result line ({ex})"))
        if o.rc == 0 and "bad-shape" in flags:
            o.violations.append(fz.Violation("accepted", "a buffer of a non-positive or "
                                             "absurd shape was accepted"))
        fz.settle(o, fz.NEW_DEFECTS, context=f"kernel: {desc}\n--- kern.py ---\n{src}", log=log)
