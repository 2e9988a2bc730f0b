"""Matrix products of float16 / bfloat16 tensors on the host as the NPU computes them.

On the board a script's reference `torch.matmul(q, k)` of float16 tensors runs on the same
Cube as the kernel it checks, so the two agree bit for bit and a script may compare them at
1e-5. Torch's CPU kernels sum in another order (a float16 ulp apart on ~0.02 % of the
elements). Here such products go through the simulator's own Cube arithmetic
(`_tilepipe.cube_matmul`: one K fractal at a time into float32, docs/simulator.md) and are
rounded once to the operands' dtype, as torch_npu returns them. Anything else (other dtypes,
`out=`, an einsum without a contracted index, ellipses, repeated indices) is left to torch."""

import math

import torch

_LOW = {torch.float16: "f16", torch.bfloat16: "bf16"}


def _bmm(a, b):
    """[batch, M, K] x [batch, K, N] of one low dtype -> that dtype, through the Cube."""
    import _tilepipe

    c = _tilepipe.cube_matmul(a.float().contiguous().numpy(), b.float().contiguous().numpy(),
                              _LOW[a.dtype])
    return torch.from_numpy(c).to(a.dtype)


def _matmul(a, b):
    """torch.matmul's shapes (1-d operands, broadcast batch dimensions)."""
    if a.dim() == 0 or b.dim() == 0:
        return NotImplemented
    va, vb = a.dim() == 1, b.dim() == 1
    a2 = a.unsqueeze(0) if va else a
    b2 = b.unsqueeze(-1) if vb else b
    if a2.shape[-1] != b2.shape[-2]:
        return NotImplemented  # torch's own error
    batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    c = _bmm(a2.expand(*batch, m, k).reshape(-1, m, k), b2.expand(*batch, k, n).reshape(-1, k, n))
    c = c.reshape(*batch, m, n)
    if va:
        c = c.squeeze(-2)
    if vb:
        c = c.squeeze(-1)
    return c


def _einsum(eq, a, b):
    """A two-operand einsum with a contracted index, as one batched matrix product: batch
    indices (both operands and the output), each operand's own output indices, the contracted
    ones in the first operand's order (the K order of the product)."""
    eq = eq.replace(" ", "")
    if "." in eq or "->" not in eq:
        return NotImplemented
    lhs, out = eq.split("->")
    ins = lhs.split(",")
    if len(ins) != 2 or any(len(set(s)) != len(s) for s in (*ins, out)) or \
            len(ins[0]) != a.dim() or len(ins[1]) != b.dim():
        return NotImplemented
    sa, sb = ins
    con = [i for i in sa if i in sb and i not in out]
    if not con or any(i not in sb and i not in out for i in sa) or \
            any(i not in sa and i not in out for i in sb):
        return NotImplemented
    bat = [i for i in out if i in sa and i in sb]
    fa = [i for i in out if i in sa and i not in sb]
    fb = [i for i in out if i in sb and i not in sa]
    size = {i: a.shape[sa.index(i)] for i in sa}
    for i in sb:
        if i in size and size[i] != b.shape[sb.index(i)]:
            return NotImplemented  # torch's own error
        size[i] = b.shape[sb.index(i)]

    def prod(ix):
        return math.prod(size[i] for i in ix)

    pa = a.permute(*[sa.index(i) for i in bat + fa + con]).reshape(prod(bat), prod(fa), prod(con))
    pb = b.permute(*[sb.index(i) for i in bat + con + fb]).reshape(prod(bat), prod(con), prod(fb))
    c = _bmm(pa, pb).reshape(*[size[i] for i in bat + fa + fb])
    order = bat + fa + fb
    return c.permute(*[order.index(i) for i in out])


def product(func, args, kwargs):
    """The Cube's result of a matrix product of float16 / bfloat16 tensors, or NotImplemented
    when `func`'s call is not one (torch computes it)."""
    if kwargs:
        return NotImplemented
    einsum = func is torch.einsum
    ops = args[1:] if einsum else args  # einsum(eq, a, b) or einsum(eq, [a, b])
    if einsum and len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = tuple(ops[0])
    if len(ops) != 2 or not all(isinstance(t, torch.Tensor) for t in ops) or \
            ops[0].dtype != ops[1].dtype or ops[0].dtype not in _LOW or \
            any(t.requires_grad for t in ops):
        return NotImplemented
    a, b = ops
    if einsum:
        return _einsum(args[0], a, b) if isinstance(args[0], str) else NotImplemented
    if func in (torch.mm, torch.Tensor.mm) and (a.dim() != 2 or b.dim() != 2):
        return NotImplemented
    if func in (torch.bmm, torch.Tensor.bmm) and (a.dim() != 3 or b.dim() != 3):
        return NotImplemented
    if func is torch.Tensor.__rmatmul__:
        a, b = b, a
    return _matmul(a, b)


FUNCS = (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.__rmatmul__,
         torch.mm, torch.Tensor.mm, torch.bmm, torch.Tensor.bmm, torch.einsum)
