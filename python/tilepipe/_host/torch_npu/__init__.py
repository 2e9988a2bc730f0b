"""torch_npu under `tilepipe run-py` on Debian's torch: the vendor ops the corpus's scripts use
as references, as golden versions in torch where their semantics are public (Ascend's
torch_npu API documentation); any other name is a clear error at the caller's line."""

import importlib
import os
import sys

import torch
import torch.nn.functional as F

__version__ = "0.0.0+tilepipe-host"
npu = getattr(torch, "npu", None)  # torch_npu.npu is torch.npu (host.install)


def _unsupported(name):
    from tilelang._core import UnsupportedName, user_loc

    return UnsupportedName(
        f"torch_npu.{name} has no host model under tilepipe run-py (a vendor op without a "
        f"public golden version here)", loc=user_loc(),
        hint="compare against a torch reference on the host instead")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise _unsupported(name)


def _with_grad(fn, x):
    x = x.detach().float().requires_grad_(True)
    with torch.enable_grad():
        y = fn(x)
    return x, y


def npu_gelu_backward(grad, self, approximate="none"):
    """d gelu(self) * grad (torch's gelu, erf or tanh form)."""
    x, y = _with_grad(lambda t: F.gelu(t, approximate=approximate), self)
    (g,) = torch.autograd.grad(y, x, grad.float())
    return g.to(self.dtype)


def _swiglu(x, dim=-1):
    a, b = x.chunk(2, dim=dim)
    return F.silu(a) * b


def npu_swiglu(x, dim=-1):
    """silu(A) * B with [A, B] = x split in halves along `dim`."""
    return _swiglu(x.float(), dim).to(x.dtype)


def npu_swiglu_backward(grad_output, x, dim=-1):
    """The gradient of npu_swiglu with respect to x (x's shape).

    aclnnSwiGluGrad checks no shape: given a grad_output larger than the swiglu output, the
    board reads its first elements in the output's shape (reported to CANN as ops-nn issue
    7173, "yGrad not halved is silently accepted"), which is what `swi_glu_grad.py`'s kernel
    also reads of the same tensor; that is modelled, with a warning. Fewer elements would be
    read past the tensor's end: an error."""
    xx, y = _with_grad(lambda t: _swiglu(t, dim), x)
    if tuple(grad_output.shape) != tuple(y.shape):
        from tilelang._core import TilelangError, user_loc, warn_at
        from tilelang._jit import TensorViewWarning

        shapes = (f"torch_npu.npu_swiglu_backward: grad_output has shape "
                  f"{tuple(grad_output.shape)}; npu_swiglu of x {tuple(x.shape)} has shape "
                  f"{tuple(y.shape)}")
        if grad_output.numel() < y.numel():
            raise TilelangError(shapes, loc=user_loc(),
                                hint="pass the gradient of the swiglu output")
        msg = (f"{shapes}: its first {y.numel()} elements are read in that shape, as "
               f"aclnnSwiGluGrad reads them (it checks no shape)")
        warn_at(msg, TensorViewWarning, user_loc())
        grad_output = grad_output.reshape(-1)[:y.numel()].reshape(y.shape)
    (g,) = torch.autograd.grad(y, xx, grad_output.float())
    return g.to(x.dtype)


def npu_rotary_mul(x, r1, r2, rotary_mode="half"):
    """x * r1 + rotate(x) * r2; rotate is [-x2, x1] of the halves ("half") or
    [-x1, x0, -x3, x2, ...] of the pairs ("interleave")."""
    xf = x.float()
    if rotary_mode == "half":
        x1, x2 = xf.chunk(2, dim=-1)
        rot = torch.cat((-x2, x1), dim=-1)
    elif rotary_mode == "interleave":
        pairs = xf.reshape(*xf.shape[:-1], -1, 2)
        rot = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).reshape(xf.shape)
    else:
        raise ValueError(f"npu_rotary_mul: rotary_mode {rotary_mode!r} is 'half' or 'interleave'")
    return (xf * r1.float() + rot * r2.float()).to(x.dtype)


def npu_cross_entropy_loss(input, target, weight=None, reduction="mean", ignore_index=-100,
                           label_smoothing=0.0, lse_square_scale_for_zloss=0.0,
                           return_zloss=False):
    """(loss, log_prob, zloss, lse_for_zloss) as torch's cross entropy and log_softmax."""
    xf = input.float()
    log_prob = F.log_softmax(xf, dim=-1)
    loss = F.nll_loss(log_prob, target.long(), weight=weight, reduction=reduction,
                      ignore_index=ignore_index) if label_smoothing == 0.0 else \
        F.cross_entropy(xf, target.long(), weight=weight, reduction=reduction,
                        ignore_index=ignore_index, label_smoothing=label_smoothing)
    zloss = torch.zeros(())
    lse = torch.logsumexp(xf, dim=-1)
    return loss.to(input.dtype), log_prob.to(input.dtype), zloss, lse


class _Permute(torch.autograd.Function):
    """index_select of token rows whose gradient is aclnnMoeTokenPermuteGrad's: each token's
    topk copies summed in float32 in copy order and rounded once to the tokens' dtype (a
    float16 index_add would round after every add)."""

    @staticmethod
    def forward(ctx, tokens, rows, sorted_indices, topk):
        ctx.save_for_backward(sorted_indices)
        ctx.topk = topk
        return tokens.index_select(0, rows)

    @staticmethod
    def backward(ctx, grad):
        (sorted_indices,) = ctx.saved_tensors
        return _sum_copies(grad, sorted_indices, ctx.topk, None), None, None, None


def _sum_copies(rows_of, sorted_indices, topk, probs):
    """Token t: the sum over k of row sorted_indices[t * topk + k] of `rows_of` (rows past it
    count 0), weighted by probs[t, k] when given, in float32 in k order, rounded once."""
    hidden = rows_of.size(-1)
    rows = sorted_indices.long()
    n = rows_of.size(0)
    src = torch.cat((rows_of.float(), torch.zeros(1, hidden)), 0)
    out = src.index_select(0, torch.where(rows < n, rows, torch.full_like(rows, n)))
    out = out.reshape(-1, topk, hidden)
    if probs is not None:
        out = out * probs.float().unsqueeze(-1)
    acc = out[:, 0]
    for k in range(1, topk):
        acc = acc + out[:, k]
    return acc.to(rows_of.dtype)


def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """(permuted tokens, sorted indices): the tokens' copies grouped by expert id, stable in
    token order (the first num_out_tokens of them); sorted_indices[t * topk + k] is the row
    of token t's k-th copy in the permuted tokens (int32), which unpermute gathers."""
    if padded_mode:
        raise _unsupported("npu_moe_token_permute(padded_mode=True)")
    topk = 1 if indices.dim() == 1 else indices.size(1)
    flat = indices.reshape(-1)
    order = torch.sort(flat.long(), stable=True)[1]
    n = flat.numel() if not num_out_tokens else int(num_out_tokens)
    sorted_indices = torch.argsort(order).to(torch.int32)
    return _Permute.apply(tokens, order[:n] // topk, sorted_indices, topk), sorted_indices


def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                            restore_shape=None):
    """The inverse of npu_moe_token_permute: token t is the sum over k of the permuted row
    sorted_indices[t * topk + k] (rows past the permuted tokens count 0), weighted by
    probs[t, k] when given."""
    if padded_mode:
        raise _unsupported("npu_moe_token_unpermute(padded_mode=True)")
    topk = 1 if probs is None else probs.size(-1)
    return _sum_copies(permuted_tokens, sorted_indices, topk, probs)


def _golden():
    try:
        return importlib.import_module("sfa_golden")
    except ImportError:
        pass
    for base in list(sys.path):  # the corpus keeps sfa_golden.py one directory above the driver
        cand = os.path.join(base or ".", "..", "sfa_golden.py")
        if os.path.exists(cand):
            sys.path.append(os.path.abspath(os.path.dirname(cand)))
            return importlib.import_module("sfa_golden")
    raise _unsupported("npu_sparse_flash_attention (its golden model sfa_golden.py is not on "
                       "the path)")


def npu_sparse_flash_attention(query, key, value, sparse_indices, scale_value, sparse_block_size,
                               actual_seq_lengths_query, actual_seq_lengths_kv, query_rope=None,
                               key_rope=None, layout_query="BSND", layout_kv="BSND",
                               sparse_mode=3, block_table=None, attention_mode=None, **kw):
    """The corpus's own reference model (sfa_golden.cpu_sparse_flash_attention)."""
    def plain(x):  # the golden reads its tensors with .numpy()
        return x.detach() if isinstance(x, torch.Tensor) else x

    (query, key, value, sparse_indices, actual_seq_lengths_query, actual_seq_lengths_kv,
     query_rope, key_rope, block_table) = map(plain, (
        query, key, value, sparse_indices, actual_seq_lengths_query, actual_seq_lengths_kv,
        query_rope, key_rope, block_table))
    out = _golden().cpu_sparse_flash_attention(
        query, key, value, sparse_indices, scale_value, sparse_block_size,
        actual_seq_lengths_query, actual_seq_lengths_kv, query_rope=query_rope,
        key_rope=key_rope, layout_query=layout_query, layout_kv=layout_kv,
        sparse_mode=sparse_mode, block_table=block_table)
    if not isinstance(out, torch.Tensor):
        out = torch.tensor(out)
    return out, None, None


def npu_fusion_attention(query, key, value, head_num, input_layout="BNSD", pse=None,
                         padding_mask=None, atten_mask=None, scale=1.0, keep_prob=1.0,
                         pre_tockens=2147483647, next_tockens=2147483647, inner_precise=0,
                         prefix=None, sparse_mode=0, **kw):
    """softmax(q k^T * scale [masked]) v in float32, rounded to the input dtype; layouts BNSD,
    BSND, BSH, SBH; atten_mask True = masked out; GQA by repeating k / v heads. Returns
    (attention_out, None, ...) like the op's 7-tuple (the softmax statistics are not given)."""
    if keep_prob != 1.0 or pse is not None or padding_mask is not None or prefix is not None:
        raise _unsupported("npu_fusion_attention with dropout, pse, padding_mask or prefix")
    if sparse_mode not in (0, 2, 3) or (sparse_mode == 0 and (pre_tockens < 65535
                                                                or next_tockens < 65535)):
        raise _unsupported(f"npu_fusion_attention(sparse_mode={sparse_mode}, band tokens)")

    def to_bnsd(x):
        if input_layout == "BNSD":
            return x
        if input_layout == "BSND":
            return x.transpose(1, 2)
        if input_layout == "BSH":
            b, s, h = x.shape
            return x.reshape(b, s, -1, query.shape[-1] // head_num).transpose(1, 2)
        if input_layout == "SBH":
            s, b, h = x.shape
            return x.reshape(s, b, -1, query.shape[-1] // head_num).permute(1, 2, 0, 3)
        raise _unsupported(f"npu_fusion_attention(input_layout={input_layout!r})")

    q, k, v = (to_bnsd(x) for x in (query, key, value))
    B, N, L = q.shape[:3]
    S = k.shape[2]
    rep = N // k.shape[1]  # GQA: query head n reads kv head n // rep
    if sparse_mode in (2, 3):  # causal (lower-left / lower-right aligned)
        off = 0 if sparse_mode == 2 else S - L
        mask = torch.ones(L, S, dtype=torch.bool).triu(diagonal=1 + off).expand(B, N, L, S)
    else:
        mask = None if atten_mask is None else atten_mask.bool().expand(B, N, L, S)
    # One (batch, head) at a time: a whole batch's score matrix at S = 4096 is gigabytes
    # (flash_attn_bhsd_ascendc's B=4, 32 heads: 8.6 GB of floats).
    out = torch.empty(B, N, L, v.shape[-1])
    for b in range(B):
        for n in range(N):
            s = q[b, n].float() @ k[b, n // rep].float().transpose(-2, -1) * scale
            if mask is not None:
                s = s.masked_fill(mask[b, n], float("-inf"))
            out[b, n] = torch.softmax(s, dim=-1) @ v[b, n // rep].float()
    if input_layout == "BSND":
        out = out.transpose(1, 2)
    elif input_layout == "BSH":
        out = out.transpose(1, 2).reshape(query.shape)
    elif input_layout == "SBH":
        out = out.permute(2, 0, 1, 3).reshape(query.shape)
    return (out.to(query.dtype), None, None, None, 0, 0, 0)
