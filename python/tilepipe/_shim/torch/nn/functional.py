"""torch.nn.functional: the reference ops the corpus's host code uses, in float32 numpy."""

import math

import numpy as _np

from .. import Tensor, float32


def softmax(x, dim=-1, dtype=None):
    a = x.a.astype(_np.float32)
    m = a.max(axis=dim, keepdims=True)
    e = _np.exp(a - m)
    return Tensor(e / e.sum(axis=dim, keepdims=True), x.dtype if dtype is None else dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, **kw):
    qa, ka, va = (t.a.astype(_np.float32) for t in (q, k, v))
    d = qa.shape[-1]
    s = scale if scale is not None else 1.0 / math.sqrt(d)
    lead = _np.broadcast_shapes(qa.shape[:-2], ka.shape[:-2], va.shape[:-2])
    qa, ka, va = (_np.broadcast_to(a, lead + a.shape[-2:]) for a in (qa, ka, va))
    mask = None if attn_mask is None else _np.broadcast_to(
        attn_mask.a, lead + (qa.shape[-2], ka.shape[-2]))
    out = None
    # One (batch, head) at a time: the scores of all of them at once are B*H*L*S floats
    # (4 GiB for the FA expert example's defaults).
    for i in _np.ndindex(*lead):
        scores = _np.matmul(qa[i], _np.swapaxes(ka[i], -1, -2)) * s
        if is_causal:
            L, S = scores.shape[-2], scores.shape[-1]
            scores = _np.where(_np.tril(_np.ones((L, S), dtype=bool)), scores, -_np.inf)
        if mask is not None:
            m = mask[i]
            scores = _np.where(m, scores, -_np.inf) if m.dtype == bool else scores + m
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = _np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        r = _np.matmul(p, va[i])
        if out is None:  # the dtype of the math (a float64 mask makes it float64)
            out = _np.empty(lead + r.shape, dtype=r.dtype)
        out[i] = r
    return Tensor(out, q.dtype if q.dtype is not None else float32)


def relu(x):
    return Tensor(_np.maximum(x.a, 0), x.dtype)


def gelu(x, approximate="none"):
    a = x.a.astype(_np.float64)
    if approximate == "tanh":
        y = 0.5 * a * (1 + _np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    else:
        from math import erf

        y = 0.5 * a * (1 + _np.vectorize(erf)(a / math.sqrt(2)))
    return Tensor(y, x.dtype)


def silu(x):
    a = x.a.astype(_np.float32)
    return Tensor(a / (1 + _np.exp(-a)), x.dtype)


def sigmoid(x):
    a = x.a.astype(_np.float32)
    return Tensor(1 / (1 + _np.exp(-a)), x.dtype)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    a = x.a.astype(_np.float32)
    n, c = a.shape[0], a.shape[1]
    g = a.reshape(n, num_groups, -1)
    mean = g.mean(axis=-1, keepdims=True)
    var = g.var(axis=-1, keepdims=True)
    y = ((g - mean) / _np.sqrt(var + eps)).reshape(a.shape)
    shape = [1, c] + [1] * (a.ndim - 2)
    if weight is not None:
        y = y * weight.a.astype(_np.float32).reshape(shape)
    if bias is not None:
        y = y + bias.a.astype(_np.float32).reshape(shape)
    return Tensor(y, x.dtype)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    a = x.a.astype(_np.float32)
    axes = tuple(range(a.ndim - len(tuple(normalized_shape)), a.ndim))
    mean = a.mean(axis=axes, keepdims=True)
    var = a.var(axis=axes, keepdims=True)
    y = (a - mean) / _np.sqrt(var + eps)
    if weight is not None:
        y = y * weight.a.astype(_np.float32)
    if bias is not None:
        y = y + bias.a.astype(_np.float32)
    return Tensor(y, x.dtype)
