"""torch.testing.assert_close on the shim's tensors (numpy's comparison, torch's rule:
|actual - expected| <= atol + rtol * |expected|)."""

import numpy as _np


def assert_close(actual, expected, rtol=None, atol=None, equal_nan=False, check_dtype=False,
                 msg=None, **kw):
    a = _np.asarray(getattr(actual, "a", actual), dtype=_np.float64)
    e = _np.asarray(getattr(expected, "a", expected), dtype=_np.float64)
    if rtol is None:
        rtol = 1.3e-6
    if atol is None:
        atol = 1e-5
    if a.shape != e.shape:
        raise AssertionError(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.")
    diff = _np.abs(a - e)
    ok = diff <= atol + rtol * _np.abs(e)
    nan_a, nan_e = _np.isnan(a), _np.isnan(e)
    if equal_nan:
        ok |= nan_a & nan_e
    ok &= ~(nan_a ^ nan_e)
    ok |= (a == e)  # equal infinities
    if not ok.all():
        bad = int((~ok).sum())
        i = _np.unravel_index(int(_np.argmax(_np.where(ok, -1, _np.nan_to_num(diff, nan=_np.inf)))), a.shape)
        raise AssertionError(
            msg or f"Tensor-likes are not close!\n\nMismatched elements: {bad} / {a.size} "
            f"({100.0 * bad / a.size:.1f}%)\nGreatest absolute difference: {_np.nanmax(diff)} at "
            f"index {tuple(int(x) for x in i)} (up to {atol} allowed)\n"
            f"actual {a[i]}, expected {e[i]} (rtol {rtol})")
