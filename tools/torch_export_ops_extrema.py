"""torch_export_ops.py's entries for extrema: the larger or smaller of two
tensors (torch.maximum / torch.minimum, torch.max(a, b): XGLM's guard
max(attn, finfo.min)), the max or min over every element, amin, and
max / min over one axis with its index (torch.max(x, dim): VOLO's head);
topk and sort, whose indices export fixes (fixed_decisions).

Each is remat's amax, whose values are exact (one of its inputs, never a
rounded sum) and whose gradient is split evenly among ties, as PyTorch
splits maximum's, amax's, amin's and the whole max's. A minimum is the
negated maximum of the negated inputs (negation is exact both ways)."""

import numpy as np
import torch

from torch_export_lower import Live
from torch_export_ops import _axis, _ints, _live, _reduce, _reshape, op
from torch_export_ops_vision import _flat_gather


def _column(ctx, x, out, n, negate):
    """x broadcast to `out`, as an (n, 1) column (negated for a minimum)."""
    if ctx.live(x):
        xid = _live(ctx, x)
        shape = (1,) * (len(out) - len(x.shape)) + tuple(x.shape)
        xid = _reshape(ctx, xid, x.shape, shape)
        if shape != tuple(out):
            xid = ctx.emit("expand", [xid], out, _ints(out)).id
        if negate:
            xid = ctx.emit("neg", [xid], out).id
        return _reshape(ctx, xid, out, (n, 1))
    if not hasattr(x, "tensor"):
        ctx.fail("an extremum with a %s operand (remat's: tensors)" % type(x).__name__)
    t = x.tensor.to(torch.float32).expand(out).reshape(n, 1).clone()
    return ctx.const_input(-t if negate else t, "bound")


def _pair(ctx, a, b, negate):
    """maximum(a, b) (minimum when negate): a and b side by side as the two
    columns of an (n, 2) value and amax over them; PyTorch's maximum gives
    each of two equal inputs half the gradient, as amax does."""
    out = tuple(ctx.out_shape())
    n = int(np.prod(out))
    cols = [_column(ctx, x, out, n, negate) for x in (a, b)]
    both = ctx.emit("cat", cols, (n, 2), _ints([1])).id
    y = ctx.emit("amax", [both], (n,), _ints([1])).id
    if negate:
        y = ctx.emit("neg", [y], (n,)).id
    return Live(ctx.body, _reshape(ctx, y, (n,), out), out)


@op("maximum.default")
def _maximum(ctx, a, b):
    return _pair(ctx, a, b, False)


@op("minimum.default")
def _minimum(ctx, a, b):
    return _pair(ctx, a, b, True)


def _smallest(ctx, x, dims, keepdim):
    """amin: -amax(-x), PyTorch's even split among ties kept."""
    neg = ctx.emit("neg", [_live(ctx, x)], x.shape)
    y = _reduce(ctx, "amax", neg, dims, keepdim)
    return ctx.emit("neg", [y.id], y.shape)


@op("amin.default")
def _amin(ctx, x, dims=(), keepdim=False):
    return _smallest(ctx, x, dims, keepdim)


@op("max.default")
def _max_all(ctx, x):
    """x.max() over every element: PyTorch splits its gradient among ties, as amax."""
    return _reduce(ctx, "amax", x, (), False)


@op("min.default")
def _min_all(ctx, x):
    return _smallest(ctx, x, (), False)


def _over_dim(ctx, x, dim, keepdim, smallest):
    """torch.max(x, dim) (min): the values, whose gradient PyTorch gives to
    the one element its index names. amax gives the same where each row's
    extremum is one element; the trace notes (torch_export_trace.py) whether
    the model's input had a row with ties, where amax would split it. The
    indices are not mapped: a model that reads them fails naming this op's
    output 1."""
    if ctx.call.outs[1] is not None and ctx.call.outs[1].kind == "const":
        return [_at_indices(ctx, x, dim, "max" if not smallest else "min"), None]
    if ctx.call.note is not False:
        ctx.fail("%s(dim=%d) where a row's %s is held by several elements (PyTorch gives the gradient to the one "
                 "its index names; remat's amax splits it among them)"
                 % ("min" if smallest else "max", dim, "minimum" if smallest else "maximum"))
    dims = (_axis(dim, len(x.shape)),) if x.shape else ()
    y = _smallest(ctx, x, dims, keepdim) if smallest else _reduce(ctx, "amax", x, dims, keepdim)
    return [y, None]


@op("max.dim")
def _max_dim(ctx, x, dim, keepdim=False):
    return _over_dim(ctx, x, dim, keepdim, False)


@op("min.dim")
def _min_dim(ctx, x, dim, keepdim=False):
    return _over_dim(ctx, x, dim, keepdim, True)


# Selections whose indices are fixed at export (export's fixed_decisions:
# the trace keeps an index computed from the model's values as a constant):
# the values are a gather at those indices, PyTorch's own gradient, ties
# and all.
def _at_indices(ctx, x, dim, what):
    """x's elements at the call's output 1, the indices along dim (keepdim's
    shape or without dim), as a gather; an error when they are not fixed."""
    idx = ctx.call.outs[1]
    if idx is None or idx.kind != "const":
        ctx.fail("%s's indices computed from the model's values (export(..., fixed_decisions=True) takes this "
                 "run's)" % what)
    rank = len(x.shape)
    d = _axis(dim, rank) if rank else 0
    index = idx.tensor if idx.tensor.dim() == rank else idx.tensor.unsqueeze(d)
    with torch.no_grad():
        flat = torch.gather(torch.arange(int(np.prod(x.shape))).reshape(x.shape), d, index) if rank else index
    return _flat_gather(ctx, x, flat, tuple(ctx.out_shape()))


@op("topk.default")
def _topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    """torch.topk (a mixture of experts' router): its values at its indices."""
    return [_at_indices(ctx, x, dim, "topk"), None]


@op("sort.default", "sort.stable")
def _sort(ctx, x, *args, dim=-1, **kwargs):
    """torch.sort: its values at its permutation (sort.default's dim is its
    second argument; sort.stable's a keyword)."""
    if args and not isinstance(args[0], bool):
        dim = args[0]
    return [_at_indices(ctx, x, dim, "sort"), None]
