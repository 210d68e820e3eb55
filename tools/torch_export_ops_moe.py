"""torch_export_ops.py's entries for a mixture of experts' dispatch, once
export's fixed_decisions has made the routing constant (the tokens each
expert gets, as this run chose them): the grouped matmul of Hugging Face's
default experts (transformers.integrations.moe, torch._grouped_mm: each
expert's rows of the token matrix times its weight) and index_add (the
eager experts' loop adding each expert's output into its tokens' rows)."""

import numpy as np
import torch

from torch_export_lower import Const, Live
from torch_export_ops import _axis, _ints, _live, _permute, _reshape, _slice, op


def _fixed(ctx, x, what):
    """The contents of the integer tensor x, fixed at export; else an error."""
    if not isinstance(x, Const):
        ctx.fail("%s computed from the model's values (export(..., fixed_decisions=True) takes this run's)" % what)
    return x.tensor


@op("_grouped_mm.default")
def _grouped_mm(ctx, a, b, offs=None, bias=None, out_dtype=None):
    """a (S, K) times b (E, K, N) by groups: rows [offs[e - 1], offs[e]) of
    a times b[e], an expert with no rows skipped; rows past offs[-1] are 0
    (PyTorch leaves them unwritten; Hugging Face masks them)."""
    if offs is None or bias is not None or len(a.shape) != 2 or len(b.shape) != 3:
        ctx.fail("_grouped_mm of %s by %s%s (remat's: a 2-d input, 3-d weights, offsets, no bias)"
                 % (tuple(a.shape), tuple(b.shape), " with a bias" if bias is not None else ""))
    ends = [int(e) for e in _fixed(ctx, offs, "_grouped_mm's offsets").tolist()]
    rows, k = a.shape
    experts, _, n = b.shape
    if len(ends) != experts or ends != sorted(ends) or (ends and ends[-1] > rows):
        ctx.fail("_grouped_mm offsets %s for %d experts over %d rows" % (ends, experts, rows))
    aid, bid = _live(ctx, a), ctx.id(b)
    parts, start = [], 0
    for e, end in enumerate(ends):
        if end > start:
            w = ctx.emit("select", [bid], (k, n), _ints([0, e])).id
            x = _slice(ctx, aid, (rows, k), 0, start, end - start).id
            parts.append((ctx.emit("matmul", [x, w], (end - start, n)).id, end - start))
        start = max(start, end)
    if start < rows:
        parts.append((ctx.const_input(torch.zeros(rows - start, n), "zeros"), rows - start))
    y, done = parts[0]
    for pid, more in parts[1:]:
        done += more
        y = ctx.emit("cat", [y, pid], (done, n), _ints([0])).id
    return Live(ctx.body, y, (rows, n))


@op("index_add.default")
def _index_add(ctx, base, dim, index, source, alpha=1):
    """base.index_add(dim, index, source): source's slices along dim added
    into base's at the fixed indices, as a matmul by the one-hot (n, m)
    matrix of the indices, whose sums of one term are exact (an index met
    twice adds both, in the matmul's order)."""
    idx = _fixed(ctx, index, "index_add's indices").reshape(-1).to(torch.int64)
    rank = len(source.shape)
    d = _axis(dim, rank) if rank else 0
    n, m = (base.shape[d] if rank else 1), idx.numel()
    if m and (int(idx.min()) < -n or int(idx.max()) >= n):
        ctx.fail("index_add(dim=%d) by an index outside [-%d, %d)" % (dim, n, n))
    front = [d] + [i for i in range(rank) if i != d]
    moved = tuple(source.shape[i] for i in front) if rank else (1,)
    rest = int(np.prod(moved[1:]))
    src = source
    if alpha != 1:
        src = ctx.emit("scale", [_live(ctx, source)], source.shape, " scalar=%r" % float(alpha))
    sid = _permute(ctx, src, front).id if rank > 1 and d else _live(ctx, src)
    sid = _reshape(ctx, sid, moved, (m, rest))
    onehot = torch.zeros(n, m)
    onehot[idx % n, torch.arange(m)] = 1.0
    added = ctx.emit("matmul", [ctx.const_input(onehot, "one_hot"), sid], (n, rest)).id
    out_moved = (n,) + tuple(moved[1:])
    added = Live(ctx.body, _reshape(ctx, added, (n, rest), out_moved), out_moved)
    if rank > 1 and d:
        back = [front.index(i) for i in range(rank)]
        added = _permute(ctx, added, back)
    added = Live(ctx.body, _reshape(ctx, added.id, added.shape, tuple(base.shape)), tuple(base.shape))
    if isinstance(base, Const) and not bool(base.tensor.any()):
        return added  # zeros_like(x).index_add_(...): Hugging Face's eager experts
    return ctx.emit("add", [ctx.id(base), added.id], tuple(base.shape))
