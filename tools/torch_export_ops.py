"""tools/torch_export.py's op table: each ATen op a model reduces to, as
remat's ops (engines/api/program_text.h's syntax), its attributes checked.
The entries of vision models' ops (torch_export_ops_vision.py), attention
(_attention.py), random noise (_random.py), extrema, topk and sort
(_extrema.py), experts' dispatch (_moe.py) and recurrent layers (_rnn.py)
are in files of their own and join TABLE when this module is imported.

TABLE maps "op.overload" (an in-place op as its functional one: add_.Tensor
is add.Tensor) to fn(ctx, *args, **kwargs), called only when an input is
live (depends on a parameter or float input; ops on constants are computed
at export). Arguments are the lowering's entries (torch_export_lower.py:
Live, Src, Const, Random) or Python values; fn returns the entry of each
output, or raises ctx.fail("what is not supported"). The table:

  view _unsafe_view _reshape_alias reshape unsqueeze squeeze flatten unflatten  reshape
  t transpose permute       transpose (last two axes, rank <= 3) or permute; a
                            parameter read only through .t() (nn.Linear's weight) is
                            written transposed, "<path>.T"
  expand                    expand (the identity when the shape is kept)
  clone alias lift_fresh _to_copy(f32)  the identity; detach is a stop-gradient:
                            not supported (autograd's own detaches are never read)
  slice select split split_with_sizes unbind cat stack   slice, select, cat
  add sub mul div (.Tensor, .Scalar; rsub)  add, sub, mul, div (numpy broadcasting;
                            a suffix broadcast as bias_add, a number as scale, x*x
                            as square, a constant as an input of the program)
  neg exp log sin cos relu silu tanh sigmoid rsqrt sqrt  the same op
  gelu                      gelu (approximate='tanh') or gelu_erf
  pow.Tensor_Scalar         square (2) or pow scalar=P     hardtanh  hardtanh ints=[MIN,MAX]
  masked_fill where         masked_fill, where: the mask a constant (i32 input)
  _softmax _safe_softmax _log_softmax   softmax, log_softmax (last axis)
  nll_loss_forward          cross_entropy of log_softmax's input (mean; ints=[IGNORE]
                            when the targets hold ignore_index)
  sum mean amax (.default, .dim)   sum, mean, amax ints=[AXES] keepdim=1; mean over
                            (H, W) of a rank-4 value as global_avg_pool
  maximum minimum amin max min (.default, .dim)  amax (of the two side by side; of the
                            negated for a minimum); max.dim's values where no row ties
  mm bmm addmm              matmul (+ bias_add)
  native_layer_norm         layer_norm (scalar=EPS unless 1e-5)
  native_batch_norm _native_batch_norm_legit (training)  batch_norm (rank 3 and 5
                            reshaped to 4; no affine: constant ones and zeros), and the
                            new running statistics as state of their buffers
  convolution               conv2d / conv2d_bias ints=[S,P] or [SH,SW,PH,PW,DH,DW,G]
                            (x may be a constant: XCiT's position features); conv1d as
                            conv2d over (N, C, 1, L)
  max_pool2d_with_indices   max_pool2d (ceil_mode: -inf rows and columns joined by cat)
  _adaptive_avg_pool2d      global_avg_pool or adaptive_avg_pool2d
  avg_pool2d                adaptive_avg_pool2d when its windows tile the input, else
                            a depthwise conv2d of ones (zero rows for padding and
                            ceil_mode) divided by PyTorch's divisor of each window
  native_group_norm         layer_norm of each (sample, group), then weight and bias
  var std var_mean          mean, sub, square, mean (and scale, sqrt)
  linalg_vector_norm        sqrt(sum(square) + 1e-30) (ord 2; 0 gradient at 0)
  clamp clamp_min clamp_max hardtanh (integer bounds) or relu(x - lo) + lo, hi - relu(hi - x)
  repeat                    reshape, expand, reshape
  copy_ zero_ fill_         the source (expanded), or a constant
  slice_scatter select_scatter  cat of the base's slices and the source (the trace's
                            write-back of an in-place op on a slice or a row)
  any other op on the model's values: PyTorch's decomposition of it (torch._decomp),
                            when every op that reaches is in this table (baddbmm)
  as_strided unfold         reshape, when it reads every element in order; else a
                            gather of the elements it reads (HaloNet's overlapping windows)
  hardswish hardsigmoid     add 3, hardtanh [0,6], divide by 6 (and mul by x)
  index.Tensor              embedding (one tensor of constant indices; any axis, by permute)
  roll constant_pad_nd      slice and cat (a constant's rows for padding)
  mul by bernoulli(keep)/keep of fewer axes (stochastic depth)  dropout of ones, mul
  embedding                 embedding (ints=[PADDING_IDX])
  native_dropout; bernoulli_ + div_ + mul (CPU dropout)   dropout on dropout_seed
  floor(keep + rand), rand < keep (dropout written by hand)  as bernoulli(keep)
  topk sort                 a gather at the indices, fixed at export (fixed_decisions)
  _grouped_mm index_add     by fixed groups and indices: slices, matmuls and cat; a
                            matmul by the indices' one-hot matrix
  mkldnn_rnn_layer (nn.LSTM)  unrolled: one matmul for every step's input, then each
                            step's matmul, sigmoid, tanh, mul and add
  _scaled_dot_product_flash_attention_for_cpu   its definition: matmul, scale,
                            masked_fill (causal) or the mask, softmax, dropout,
                            matmul; fewer key/value heads by expand
"""

import numpy as np
import torch

from torch_export_lower import Const, Live, Random, Src

TABLE = {}


def op(*names):
    def register(fn):
        for n in names:
            TABLE[n] = fn
        return fn
    return register


def _axis(d, rank):
    d = int(d)
    return d + rank if d < 0 else d


def _scalar(ctx, x):
    """A Python number, or the value of a one-element constant; else None."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, Const) and x.tensor.numel() == 1 and x.tensor.dtype != torch.bool:
        return float(x.tensor.reshape(()).item())
    return None


def _reshape(ctx, xid, from_shape, to_shape):
    if tuple(from_shape) == tuple(to_shape):
        return xid
    return ctx.emit("reshape", [xid], to_shape, " ints=[%s]" % ",".join(str(d) for d in to_shape)).id


def _ints(values):
    return " ints=[%s]" % ",".join(str(int(v)) for v in values)


def _live(ctx, x):
    if not ctx.live(x):
        ctx.fail("a %s input where a value of the model is expected" % type(x).__name__)
    return ctx.id(x)


# Layout.
@op("view.default", "_unsafe_view.default", "_reshape_alias.default", "reshape.default", "unsqueeze.default",
    "squeeze.dim", "squeeze.dims", "squeeze.default", "flatten.using_ints", "unflatten.int", "view.dtype")
def _view(ctx, x, *rest, **kw):
    return ctx.emit("reshape", [_live(ctx, x)], ctx.out_shape(), _ints(ctx.out_shape())) \
        if tuple(ctx.out_shape()) != tuple(x.shape) else x


def _permute(ctx, x, perm):
    perm = [_axis(d, len(x.shape)) for d in perm]
    if perm == list(range(len(perm))):
        return x
    shape = tuple(x.shape[p] for p in perm)
    if len(perm) == 2:
        tid = ctx.transposed_param(x)
        if tid is not None:
            return Live(ctx.body, tid, shape)
    if len(perm) in (2, 3) and perm == list(range(len(perm) - 2)) + [len(perm) - 1, len(perm) - 2]:
        return ctx.emit("transpose", [_live(ctx, x)], shape)
    return ctx.emit("permute", [_live(ctx, x)], shape, _ints(perm))


@op("t.default", "numpy_T.default")
def _t(ctx, x):
    return _permute(ctx, x, list(range(len(x.shape)))[::-1])


@op("transpose.int", "transpose.default")  # .default: in place, x.transpose_(0, 1) (nn.GRU batch first)
def _transpose(ctx, x, d0, d1):
    perm = list(range(len(x.shape)))
    a, b = _axis(d0, len(perm)), _axis(d1, len(perm))
    perm[a], perm[b] = perm[b], perm[a]
    return _permute(ctx, x, perm)


@op("permute.default")
def _permute_op(ctx, x, dims):
    return _permute(ctx, x, dims)


@op("expand.default")
def _expand(ctx, x, size, implicit=False):
    out = ctx.out_shape()
    if tuple(out) == tuple(x.shape):
        return x
    return ctx.emit("expand", [_live(ctx, x)], out, _ints(out))


@op("copy.default")
def _copy(ctx, x, src, non_blocking=False):
    """x.copy_(src) (out[:, :d] = y): src, broadcast to x's shape."""
    out = tuple(ctx.out_shape())
    if isinstance(src, Const):
        return ctx.constant(src.tensor.to(torch.float32).expand(out).clone(), "copy")
    if tuple(src.shape) == out:
        return src
    return ctx.emit("expand", [_live(ctx, src)], out, _ints(out))


@op("zero.default", "fill.Scalar", "fill.Tensor")
def _fill(ctx, x, value=0):
    """x.zero_(), x.fill_(c), out[1] = c: a constant of x's shape (no
    gradient reaches x)."""
    c = _scalar(ctx, value)
    if c is None:
        ctx.fail("fill_ with a value computed from the model's values (remat's: a number)")
    return ctx.constant(torch.full(tuple(x.shape), c), "fill")


@op("repeat.default")
def _repeat(ctx, x, repeats):
    """x.repeat(r0, r1, ...): each axis d with r > 1 seen as (1, d),
    expanded to (r, d) and merged back (an axis of size 1 just expands), so
    the rank stays within remat's 6 where few axes repeat."""
    reps = [int(r) for r in repeats]
    shape = [1] * (len(reps) - len(x.shape)) + list(x.shape)
    split, wide = [], []
    for r, d in zip(reps, shape):
        if r > 1 and d > 1:
            split += [1, d]
            wide += [r, d]
        else:
            split.append(d)
            wide.append(r * d)
    out = tuple(ctx.out_shape())
    if len(split) > 6:
        ctx.fail("repeat(%s) of a %s value: more than 6 axes when each repeated one is split" % (reps, tuple(x.shape)))
    xid = _reshape(ctx, _live(ctx, x), x.shape, split)
    if wide != split:
        xid = ctx.emit("expand", [xid], wide, _ints(wide)).id
    return Live(ctx.body, _reshape(ctx, xid, wide, out), out)


@op("clone.default", "alias.default", "lift_fresh.default", "contiguous.default")
def _identity(ctx, x, *rest, **kw):
    return x


@op("_to_copy.default", "to.dtype")
def _to_copy(ctx, x, *rest, dtype=None, **kw):
    if dtype not in (None, torch.float32):
        ctx.fail("a cast to %s (remat's programs are f32)" % dtype)
    return x


def _comparison(ctx, *args, **kwargs):
    ctx.fail("a mask computed from the model's values (remat's masks are fixed at export: made from buffers, "
             "shapes and constants)")


for _name in ("gt", "ge", "lt", "le", "eq", "ne", "logical_not", "logical_and", "logical_or", "isnan", "isinf",
              "argmax", "argmin"):
    for _overload in ("Scalar", "Tensor", "default"):
        TABLE["%s.%s" % (_name, _overload)] = _comparison


@op("detach.default")
def _detach(ctx, x):
    ctx.fail("detach, a stop-gradient (remat differentiates every use of a value)")


def _slice(ctx, xid, shape, axis, start, length, step=1):
    out = list(shape)
    out[axis] = length
    ints = [axis, start, length] + ([step] if step != 1 else [])
    return ctx.emit("slice", [xid], out, _ints(ints))


@op("slice.Tensor")
def _slice_op(ctx, x, dim=0, start=None, end=None, step=1):
    axis = _axis(dim, len(x.shape))
    start, stop, step = slice(start, end, step).indices(x.shape[axis])
    length = len(range(start, stop, step))
    if (start, length, step) == (0, x.shape[axis], 1):
        return x
    return _slice(ctx, _live(ctx, x), x.shape, axis, start, length, step)


@op("select.int")
def _select(ctx, x, dim, index):
    axis = _axis(dim, len(x.shape))
    index = _axis(index, x.shape[axis])
    return ctx.emit("select", [_live(ctx, x)], ctx.out_shape(), _ints([axis, index]))


def _scatter_rows(ctx, base, src_id, axis, start, length):
    """base with rows [start, start + length) of axis replaced by src (of
    that shape): base's rows before, src and base's rows after, joined two
    at a time (remat's cat takes two)."""
    n, bid = base.shape[axis], ctx.id(base)
    parts = [(src_id, length)]
    if start > 0:
        parts.insert(0, (_slice(ctx, bid, base.shape, axis, 0, start).id, start))
    if start + length < n:
        rest = n - start - length
        parts.append((_slice(ctx, bid, base.shape, axis, start + length, rest).id, rest))
    (joined, rows), shape = parts[0], list(base.shape)
    for pid, more in parts[1:]:
        rows += more
        shape[axis] = rows
        joined = ctx.emit("cat", [joined, pid], tuple(shape), _ints([axis])).id
    return Live(ctx.body, joined, tuple(ctx.out_shape()))


@op("slice_scatter.default")
def _slice_scatter(ctx, base, src, dim=0, start=None, end=None, step=1):
    """A write into base[start:end] on dim (the trace's write-back of an
    in-place op on a slice)."""
    axis = _axis(dim, len(base.shape))
    start, stop, step = slice(start, end, step).indices(base.shape[axis])
    if step != 1:
        ctx.fail("a write into a slice with step %d (remat's: step 1)" % step)
    return _scatter_rows(ctx, base, ctx.id(src), axis, start, max(stop - start, 0))


@op("select_scatter.default")
def _select_scatter(ctx, base, src, dim, index):
    """A write into base.select(dim, index) (x[:, 0] = ...)."""
    axis = _axis(dim, len(base.shape))
    index = _axis(index, base.shape[axis])
    row = list(base.shape)
    row[axis] = 1
    return _scatter_rows(ctx, base, _reshape(ctx, ctx.id(src), src.shape, row), axis, index, 1)


@op("split.Tensor", "split_with_sizes.default", "split.sizes")
def _split(ctx, x, sizes, dim=0):
    axis = _axis(dim, len(x.shape))
    n = x.shape[axis]
    sizes = [min(int(sizes), n - s) for s in range(0, n, int(sizes))] if isinstance(sizes, int) else list(sizes)
    xid, starts = _live(ctx, x), np.cumsum([0] + sizes)
    return [x if size == n else _slice(ctx, xid, x.shape, axis, int(s), int(size))
            for s, size in zip(starts[:-1], sizes)]


@op("unbind.int")
def _unbind(ctx, x, dim=0):
    axis = _axis(dim, len(x.shape))
    xid = _live(ctx, x)
    out = x.shape[:axis] + x.shape[axis + 1:]
    return [ctx.emit("select", [xid], out, _ints([axis, i])) for i in range(x.shape[axis])]


@op("cat.default")
def _cat(ctx, tensors, dim=0):
    tensors = [t for t in tensors if t.shape != (0,)]  # torch.cat skips empty 1-d tensors
    rank = len(tensors[0].shape)
    axis = _axis(dim, rank)
    y, shape = ctx.id(tensors[0]), list(tensors[0].shape)
    for t in tensors[1:]:
        shape[axis] += t.shape[axis]
        y = ctx.emit("cat", [y, ctx.id(t)], shape, _ints([axis])).id
    return Live(ctx.body, y, shape) if len(tensors) > 1 else tensors[0]


@op("stack.default")
def _stack(ctx, tensors, dim=0):
    rank = len(tensors[0].shape) + 1
    axis = _axis(dim, rank)
    shape = list(tensors[0].shape)
    shape.insert(axis, 1)
    parts = [Live(ctx.body, _reshape(ctx, ctx.id(t), t.shape, shape), shape) for t in tensors]
    return _cat(ctx, parts, axis)


@op("embedding.default")
def _embedding(ctx, weight, ids, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if ctx.live(ids) or not ctx.live(weight):
        ctx.fail("embedding of ids computed from the model's values")
    if scale_grad_by_freq or sparse:
        ctx.fail("embedding(scale_grad_by_freq=%s, sparse=%s)" % (scale_grad_by_freq, sparse))
    attrs = _ints([padding_idx]) if padding_idx is not None and padding_idx >= 0 else ""
    return ctx.emit("embedding", [ctx.id(weight), ctx.id(ids, "ids")], ctx.out_shape(), attrs)


# Arithmetic.
def _binary(ctx, name, a, b):
    """a <name> b, name in add, sub, mul, div; at least one live."""
    sa, sb = _scalar(ctx, a), _scalar(ctx, b)
    out = tuple(ctx.out_shape())
    if sb is not None and ctx.live(a) and tuple(a.shape) != out or sa is not None and ctx.live(b) and tuple(b.shape) != out:
        sa = sb = None  # a one-element tensor that broadcasts the other up: not a number
    if sb is not None and not ctx.live(b):
        if name in ("mul", "div"):
            c = sb if name == "mul" else 1.0 / sb
            return a if c == 1.0 else ctx.emit("scale", [_live(ctx, a)], ctx.out_shape(), " scalar=%r" % c)
        if sb == 0.0:
            return a
    if sa is not None and not ctx.live(a):
        if name == "mul":
            return _binary(ctx, "mul", b, a)
        if name == "add":
            return _binary(ctx, "add", b, a)
        if name == "sub" and sa == 0.0:
            return ctx.emit("neg", [_live(ctx, b)], ctx.out_shape())
    aid, bid = _operand(ctx, a, sa), _operand(ctx, b, sb)
    sa_, sb_ = _shape_of(a, sa), _shape_of(b, sb)
    if sa_ == sb_:
        if name == "mul" and aid == bid:
            return ctx.emit("square", [aid], out)
        return ctx.emit(name, [aid, bid], out)
    if name == "add":
        # A suffix broadcast (a bias of (C,) or (T, C) on (..., T, C)):
        # bias_add on rows, its gradient the sum over rows.
        big, small, bid_, sid = (sa_, sb_, aid, bid) if len(sa_) >= len(sb_) else (sb_, sa_, bid, aid)
        trail = tuple(small)
        while len(trail) > 1 and trail[0] == 1:
            trail = trail[1:]
        if trail and tuple(big) == tuple(out) and len(trail) < len(big) and tuple(big[len(big) - len(trail):]) == trail:
            n = int(np.prod(trail))
            rows = int(np.prod(big)) // n
            y = ctx.emit("bias_add", [_reshape(ctx, bid_, big, (rows, n)), _reshape(ctx, sid, small, (n,))], (rows, n))
            return Live(ctx.body, _reshape(ctx, y.id, (rows, n), out), out)
    return ctx.emit(name, [aid, bid], out)


def _shape_of(x, s):
    return () if s is not None and not isinstance(x, (Live, Src, Const)) else tuple(x.shape)


def _operand(ctx, x, s):
    if isinstance(x, (Live, Src, Const)):
        return ctx.id(x)
    return ctx.const_input(torch.tensor(s, dtype=torch.float32), "scalar")


def _alpha(ctx, b, alpha):
    if alpha in (None, 1):
        return b
    if ctx.live(b):
        return ctx.emit("scale", [ctx.id(b)], b.shape, " scalar=%r" % float(alpha))
    return alpha * _scalar(ctx, b)


@op("add.Tensor", "add.Scalar")
def _add(ctx, a, b, alpha=1):
    return _binary(ctx, "add", a, _alpha(ctx, b, alpha))


@op("sub.Tensor", "sub.Scalar")
def _sub(ctx, a, b, alpha=1):
    return _binary(ctx, "sub", a, _alpha(ctx, b, alpha))


@op("rsub.Tensor", "rsub.Scalar")
def _rsub(ctx, a, b, alpha=1):
    return _binary(ctx, "sub", b, _alpha(ctx, a, alpha))


@op("mul.Tensor", "mul.Scalar")
def _mul(ctx, a, b):
    for x, noise in ((a, b), (b, a)):
        if isinstance(noise, Random) and not isinstance(x, Random) and hasattr(x, "shape"):
            # x may be a constant (Funnel's dropout of its sinusoid tables).
            if not _broadcasts(noise.shape, x.shape):
                ctx.fail("a product with random values that is not dropout's (bernoulli(1-p) / (1-p))")
            p = float("%.12g" % (1.0 - noise.keep))
            if noise.scaled and tuple(noise.shape) == tuple(x.shape):
                return ctx.dropout(ctx.id(x), p, ctx.out_shape())
            # Otherwise the contract's dropout of ones of the noise's shape is
            # the draw, and the product broadcasts it: stochastic depth
            # (torchvision's StochasticDepth, timm's drop_path), one draw per
            # sample, (N, 1, ...). Unscaled bernoulli(keep) (Hugging Face's
            # drop path divides x by keep first) is that mask, 0 or 1/keep,
            # times keep: 1 up to its rounding.
            ones = ctx.const_input(torch.ones(noise.shape), "ones")
            mask = ctx.dropout(ones, p, noise.shape)
            if not noise.scaled:
                mask = ctx.emit("scale", [mask.id], noise.shape, " scalar=%r" % float(noise.keep))
            return ctx.emit("mul", [ctx.id(x), mask.id], ctx.out_shape())
    return _binary(ctx, "mul", a, b)


def _broadcasts(small, big):
    """Whether `small` broadcasts to `big` (numpy's rule) without growing it."""
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(tuple(small)[::-1], tuple(big)[::-1]))


@op("div.Tensor", "div.Scalar")
def _div(ctx, a, b):
    if isinstance(a, Random):
        c = _scalar(ctx, b)
        if a.scaled or c is None or abs(c - a.keep) > 1e-12:
            ctx.fail("random values divided by %r (dropout divides bernoulli(1-p) by 1-p)" % (c,))
        return Random(a.keep, True, a.shape)
    return _binary(ctx, "div", a, b)


@op("bernoulli.float", "bernoulli.p")
def _bernoulli(ctx, x, p=0.5, generator=None):
    if ctx.live(x):
        ctx.fail("bernoulli of the model's values")
    return Random(float(p), False, x.shape)


@op("native_dropout.default")
def _native_dropout(ctx, x, p, train):
    if not train or p == 0:
        return [x, None]
    return [ctx.dropout(_live(ctx, x), float(p), x.shape), None]


def _unary(name):
    def lower(ctx, x):
        return ctx.emit(name, [_live(ctx, x)], x.shape)
    return lower


for _name in ("neg", "exp", "log", "sin", "cos", "relu", "silu", "tanh", "sigmoid", "rsqrt", "sqrt"):
    TABLE["%s.default" % _name] = _unary(_name)


@op("softplus.default")
def _softplus(ctx, x, beta=1, threshold=20):
    """PyTorch's softplus, log1p(exp(beta x)) / beta, x where beta x >
    threshold, from remat's exp and log: with p = relu(beta x - threshold)
    and a = beta x - p (beta x up to the threshold, the threshold past it),
    softplus = (log1p(exp(a)) + p) / beta. log1p(u) = log(w) - ((w - 1) -
    u) / w with w = 1 + u corrects w's rounding, accurate where u is below
    float's epsilon (a plain log(1 + u) is 0 there; Mamba's step sizes sit
    near exp(-7)). The gradient is sigmoid(beta x) up to the threshold, the
    threshold included, as PyTorch's, and 1 past it: a's gradient is 1 - 0
    below (no 1 - 1 that would cancel sigmoid's tail) and at it."""
    if beta <= 0 or threshold != int(threshold) or abs(threshold) >= 2 ** 31:
        ctx.fail("softplus(beta=%r, threshold=%r) (remat's: beta > 0, an integer threshold)" % (beta, threshold))
    z = x if beta == 1 else _binary(ctx, "mul", x, float(beta))
    past = ctx.emit("relu", [_binary(ctx, "sub", z, float(threshold)).id], x.shape)
    a = _binary(ctx, "sub", z, past)
    u = ctx.emit("exp", [a.id], x.shape)
    w = _binary(ctx, "add", u, 1.0)
    rounding = _binary(ctx, "sub", _binary(ctx, "sub", w, 1.0), u)
    log1p = _binary(ctx, "sub", ctx.emit("log", [w.id], x.shape), _binary(ctx, "div", rounding, w))
    y = _binary(ctx, "add", log1p, past)
    return y if beta == 1 else _binary(ctx, "div", y, float(beta))


@op("log_sigmoid_forward.default")
def _log_sigmoid(ctx, x):
    """log(sigmoid(x)) = -softplus(-x) (nn.LogSigmoid, preference losses)."""
    neg = ctx.emit("neg", [_live(ctx, x)], x.shape)
    return [ctx.emit("neg", [_softplus(ctx, neg).id], x.shape), None]


@op("gelu.default")
def _gelu(ctx, x, approximate="none"):
    return ctx.emit("gelu" if approximate == "tanh" else "gelu_erf", [_live(ctx, x)], x.shape)


@op("pow.Tensor_Scalar")
def _pow(ctx, x, p):
    if p == 2:
        return ctx.emit("square", [_live(ctx, x)], x.shape)
    if p == 1:
        return x
    return ctx.emit("pow", [_live(ctx, x)], x.shape, " scalar=%r" % float(p))


def _clamped(ctx, x, lo, hi):
    """x clamped to [lo, hi] (either None) with PyTorch's clamp gradient, 1
    on [lo, hi], the bounds included: a zero-initialised BatchNorm before
    x.clamp(min=0) puts every element on the bound. The values, c: hardtanh
    for integer bounds, else max(x, lo) = relu(x - lo) + lo and min(x, hi)
    = hi - relu(hi - x) (F.normalize's clamp_min(1e-12): x up to the
    rounding of x - lo + lo); c's gradient is 0 at a bound, as relu's. So
    the result is c + s(e), e = x - c, s(e) = e - relu(e) + relu(-e): s is
    exactly 0, and its gradient, 1 where e is exactly 0 and 0 elsewhere,
    adds 1 - c' where c equals x: 1 at a bound, 0 inside."""
    for b in (lo, hi):
        if b is not None and _scalar(ctx, b) is None:
            ctx.fail("clamp by a tensor (remat's: numbers)")
    lo, hi = (None if b is None else _scalar(ctx, b) for b in (lo, hi))
    for b in (lo, hi):
        if b is not None and abs(b) >= 2.0 ** 31:
            # x - lo + lo would round x away, and hardtanh's integer bounds
            # stop at 2^31 (finfo.min as a bound: XGLM's attention guard).
            ctx.fail("clamp to %r (remat's: bounds below 2^31 in magnitude)" % b)
    if lo is not None and hi is not None and lo == int(lo) and hi == int(hi):
        c = ctx.emit("hardtanh", [_live(ctx, x)], x.shape, _ints([lo, hi]))
    else:
        c = x
        if lo is not None:
            r = ctx.emit("relu", [_binary(ctx, "sub", c, lo).id if lo else _live(ctx, c)], x.shape)
            c = _binary(ctx, "add", r, lo) if lo else r
        if hi is not None:
            r = ctx.emit("relu", [_binary(ctx, "sub", hi, c).id], x.shape)
            c = _binary(ctx, "sub", hi, r)
    e = ctx.emit("sub", [_live(ctx, x), c.id], x.shape).id
    above = ctx.emit("relu", [e], x.shape).id
    below = ctx.emit("relu", [ctx.emit("neg", [e], x.shape).id], x.shape).id
    s = ctx.emit("add", [ctx.emit("sub", [e, above], x.shape).id, below], x.shape).id
    return ctx.emit("add", [c.id, s], x.shape)


@op("clamp.default")
def _clamp(ctx, x, lo=None, hi=None):
    return _clamped(ctx, x, lo, hi)


@op("clamp_min.default")
def _clamp_min(ctx, x, lo):
    return _clamped(ctx, x, lo, None)


@op("clamp_max.default")
def _clamp_max(ctx, x, hi):
    return _clamped(ctx, x, None, hi)


@op("leaky_relu.default")
def _leaky_relu(ctx, x, slope=0.01):
    """relu(x) + slope * (x - relu(x)) (CSPDarknet's, YOLO's): x above 0 and
    slope * x below, each exact, and the gradient PyTorch's on both sides
    and at exactly 0, slope: x - relu(x)'s gradient there is 1 - 0. That
    point matters: timm zero-initialises a block's last BatchNorm weight, so
    every input of the activation after it is exactly 0 (relu(x) - slope *
    relu(-x), the same values, gave 0 there: CSPDarknet-53's BatchNorm
    weight gradients were 100% off)."""
    r = ctx.emit("relu", [_live(ctx, x)], x.shape)
    below = ctx.emit("sub", [_live(ctx, x), r.id], x.shape)
    return ctx.emit("add", [r.id, ctx.emit("scale", [below.id], x.shape, " scalar=%r" % float(slope)).id], x.shape)


@op("hardtanh.default")
def _hardtanh(ctx, x, lo=-1.0, hi=1.0):
    if lo != int(lo) or hi != int(hi):
        ctx.fail("hardtanh(min_val=%r, max_val=%r) (remat's takes integer bounds)" % (lo, hi))
    return ctx.emit("hardtanh", [_live(ctx, x)], x.shape, _ints([lo, hi]))


def _mask(ctx, mask, shape, hint="mask", invert=False):
    """A constant boolean mask, broadcast to `shape`, as an i32 input (1 where true)."""
    if ctx.live(mask) or not isinstance(mask, Const):
        ctx.fail("a mask computed from the model's values (remat's masks are fixed at export: made from "
                 "buffers, shapes and constants)")
    m = mask.tensor.to(torch.bool)
    if invert:
        m = ~m
    try:
        m = m.expand(shape)
    except RuntimeError:
        ctx.fail("a mask of shape %s on a value of shape %s" % (tuple(mask.shape), tuple(shape)))
    return ctx.const_input(m.to(torch.int32).contiguous(), hint)


@op("masked_fill.Scalar", "masked_fill.Tensor")
def _masked_fill(ctx, x, mask, value):
    v = _scalar(ctx, value)
    if v is None:
        ctx.fail("masked_fill with a tensor value (remat's fills with a number)")
    return ctx.emit("masked_fill", [_live(ctx, x), _mask(ctx, mask, x.shape)], x.shape, " scalar=%r" % v)


@op("where.self")
def _where(ctx, cond, a, b):
    if ctx.live(cond):
        ctx.fail("where with a condition computed from the model's values")
    c = _mask(ctx, cond, cond.shape)
    return ctx.emit("where", [c, _operand(ctx, a, _scalar(ctx, a)), _operand(ctx, b, _scalar(ctx, b))],
                    ctx.out_shape())


# Softmax and the loss.
def _over_axis(ctx, name, x, dim):
    """remat's `name` (softmax, log_softmax: over the last axis) over `dim`:
    any other axis is swapped to the last and back (SKNet's and ResNeSt's
    softmax over the branches, dim 1), copies that change no value."""
    n = len(x.shape)
    a = _axis(dim, n)
    if a == n - 1:
        return ctx.emit(name, [_live(ctx, x)], x.shape)
    swap = list(range(n))
    swap[a], swap[-1] = swap[-1], swap[a]
    y = _permute(ctx, x, swap)
    return _permute(ctx, ctx.emit(name, [_live(ctx, y)], y.shape), swap)  # a swap is its own inverse


@op("_softmax.default", "_safe_softmax.default")
def _softmax(ctx, x, dim, *rest):
    if ctx.call.note is True:
        ctx.fail("softmax of a row that is -inf everywhere (PyTorch's safe softmax gives 0, remat's nan)")
    return _over_axis(ctx, "softmax", x, dim)


@op("_log_softmax.default")
def _log_softmax(ctx, x, dim, half_to_float=False):
    y = _over_axis(ctx, "log_softmax", x, dim)
    if _axis(dim, len(x.shape)) == len(x.shape) - 1:
        y.origin = ("log_softmax", x)  # cross_entropy's logits (nll_loss reads them)
    return y


@op("nll_loss_forward.default")
def _nll_loss(ctx, x, target, weight, reduction, ignore_index):
    origin = getattr(x, "origin", None)
    if origin is None or origin[0] != "log_softmax" or len(x.shape) != 2:
        ctx.fail("nll_loss of %s values (remat's cross_entropy takes log_softmax's (N, C) logits)"
                 % ("rank-%d" % len(x.shape) if len(x.shape) != 2 else "other"))
    if weight is not None or reduction != 1:
        ctx.fail("cross_entropy(weight=%s, reduction=%s) (remat's: no weight, the mean)"
                 % (weight is not None, ["none", "mean", "sum"][reduction]))
    if ctx.live(target):
        ctx.fail("targets computed from the model's values")
    # ignore_index only where a target holds it; shapes only (no targets
    # known): always, which holds for any targets.
    held = target.tensor.is_meta or bool((target.tensor == ignore_index).any())
    loss = ctx.emit("cross_entropy", [ctx.id(origin[1]), ctx.id(target, "targets")], (),
                    _ints([ignore_index]) if held else "")
    return [loss, None]


# Reductions.
def _reduce(ctx, name, x, dims, keepdim):
    rank = len(x.shape)
    axes = sorted({_axis(d, rank) for d in dims}) if dims else list(range(rank))
    out = ctx.out_shape()
    if axes == list(range(rank)) and not keepdim:
        s = ctx.emit("sum" if name != "amax" else "amax", [_live(ctx, x)], ())
        if name == "mean":
            s = ctx.emit("scale", [s.id], (), " scalar=%r" % (1.0 / int(np.prod(x.shape))))
        return s
    if name == "mean" and rank == 4 and axes == [2, 3]:
        g = ctx.emit("global_avg_pool", [_live(ctx, x)], x.shape[:2])
        return Live(ctx.body, _reshape(ctx, g.id, x.shape[:2], out), out)
    return ctx.emit(name, [_live(ctx, x)], out, _ints(axes) + (" keepdim=1" if keepdim else ""))


@op("sum.dim_IntList")
def _sum_dim(ctx, x, dims, keepdim=False, dtype=None):
    return _reduce(ctx, "sum", x, dims, keepdim)


@op("mean.dim")
def _mean_dim(ctx, x, dims, keepdim=False, dtype=None):
    return _reduce(ctx, "mean", x, dims, keepdim)


@op("sum.default")
def _sum(ctx, x, dtype=None):
    return _reduce(ctx, "sum", x, None, False)


@op("mean.default")
def _mean(ctx, x, dtype=None):
    return _reduce(ctx, "mean", x, None, False)


@op("amax.default")
def _amax(ctx, x, dims=(), keepdim=False):
    return _reduce(ctx, "amax", x, dims, keepdim)


# Variances and norms: their definitions over remat's mean, sub, square,
# scale and sqrt (user-written layer norms, group_norm's and F.normalize's
# decompositions).
def _axes_of(x, dims):
    rank = len(x.shape)
    return sorted({_axis(d, rank) for d in dims}) if dims else list(range(rank))


def _var(ctx, x, dims, correction, keepdim):
    """(mean of (x - mean(x))^2 over dims) n / (n - correction), and the mean
    (keepdim as asked); ids."""
    axes = _axes_of(x, dims)
    n = int(np.prod([x.shape[a] for a in axes]))
    c = 1.0 if correction is None else float(correction)
    if n - c <= 0:
        ctx.fail("var over %d elements with correction %r (no degrees of freedom left)" % (n, c))
    kept = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
    xid = _live(ctx, x)
    m = ctx.emit("mean", [xid], kept, _ints(axes) + " keepdim=1")
    dev = ctx.emit("sub", [xid, m.id], x.shape)
    sq = ctx.emit("square", [dev.id], x.shape)
    out = tuple(d for a, d in enumerate(x.shape) if a not in axes) if not keepdim else kept
    v = ctx.emit("mean", [sq.id], out, _ints(axes) + (" keepdim=1" if keepdim else ""))
    if c != 0:
        v = ctx.emit("scale", [v.id], out, " scalar=%r" % (n / (n - c)))
    return v, Live(ctx.body, _reshape(ctx, m.id, kept, out), out)


@op("var.correction", "var.dim")
def _var_op(ctx, x, dims=None, unbiased=None, keepdim=False, correction=None):
    if isinstance(unbiased, bool):  # var.dim(x, dims, unbiased, keepdim)
        correction = 1 if unbiased else 0
    return _var(ctx, x, dims, correction, keepdim)[0]


@op("var_mean.correction")
def _var_mean(ctx, x, dims=None, correction=None, keepdim=False):
    return list(_var(ctx, x, dims, correction, keepdim))


@op("std.correction", "std.dim")
def _std(ctx, x, dims=None, unbiased=None, keepdim=False, correction=None):
    v = _var_op(ctx, x, dims, unbiased, keepdim, correction)
    return ctx.emit("sqrt", [v.id], v.shape)


@op("linalg_vector_norm.default")
def _vector_norm(ctx, x, ord=2, dim=None, keepdim=False, dtype=None):
    """The 2-norm (F.normalize's): sqrt(sum of squares + 1e-30). The add
    rounds away wherever the norm is above about 4e-12 (F.normalize clamps
    below 1e-12 anyway); at an all-zero vector (Swin V2's keys of padded
    tokens) the norm is 1e-15 and its gradient 0, as PyTorch's, where
    sqrt's own would be 0 * inf = NaN."""
    if float(ord) != 2.0:
        ctx.fail("linalg_vector_norm(ord=%r) (remat's: ord=2)" % (ord,))
    axes = _axes_of(x, dim)
    out = tuple(ctx.out_shape())
    sq = ctx.emit("square", [_live(ctx, x)], x.shape)
    if axes == list(range(len(x.shape))) and not keepdim:
        total = ctx.emit("sum", [sq.id], ())
    else:
        total = ctx.emit("sum", [sq.id], out, _ints(axes) + (" keepdim=1" if keepdim else ""))
    return ctx.emit("sqrt", [_binary(ctx, "add", total, 1e-30).id], out)


@op("native_group_norm.default")
def _group_norm(ctx, x, weight, bias, n, c, hw, groups, eps):
    """GroupNorm: each (sample, group) normalized by layer_norm over its
    C/G * HW elements (no affine), then the per-channel weight and bias;
    mean and rstd (autograd's) are not mapped."""
    shape = tuple(x.shape)
    per = (c // groups) * hw
    rows = ctx.emit("reshape", [_live(ctx, x)], (n * groups, per), _ints((n * groups, per)))
    attrs = "" if eps == 1e-5 else " scalar=%r" % float(eps)
    y = ctx.emit("layer_norm", [rows.id, ctx.const_input(torch.ones(per), "ones"),
                                ctx.const_input(torch.zeros(per), "zeros")], (n * groups, per), attrs)
    chan = (n, c, hw)
    y = ctx.emit("reshape", [y.id], chan, _ints(chan))
    for p, name in ((weight, "mul"), (bias, "add")):
        if p is not None:
            y = ctx.emit(name, [y.id, _reshape(ctx, ctx.id(p), (c,), (1, c, 1))], chan)
    return [Live(ctx.body, _reshape(ctx, y.id, chan, shape), shape), None, None]


# Matrix products.
@op("mm.default", "bmm.default")
def _mm(ctx, a, b):
    return ctx.emit("matmul", [ctx.id(a), ctx.id(b)], ctx.out_shape())


@op("addmm.default")
def _addmm(ctx, bias, a, b, beta=1, alpha=1):
    if beta != 1 or alpha != 1 or len(bias.shape) != 1:
        ctx.fail("addmm(beta=%r, alpha=%r) with a bias of shape %s (remat's: a bias vector)"
                 % (beta, alpha, tuple(bias.shape)))
    y = ctx.emit("matmul", [ctx.id(a), ctx.id(b)], ctx.out_shape())
    return ctx.emit("bias_add", [y.id, ctx.id(bias)], ctx.out_shape())


# Normalisation.
@op("native_layer_norm.default")
def _layer_norm(ctx, x, shape, weight, bias, eps):
    c = x.shape[-1]
    if tuple(shape) != (c,):
        ctx.fail("layer_norm over %s (remat's: the last axis)" % (tuple(shape),))
    w = ctx.id(weight) if weight is not None else ctx.const_input(torch.ones(c), "ones")
    b = ctx.id(bias) if bias is not None else ctx.const_input(torch.zeros(c), "zeros")
    attrs = "" if eps == 1e-5 else " scalar=%r" % float(eps)
    return [ctx.emit("layer_norm", [_live(ctx, x), w, b], x.shape, attrs), None, None]


# The entries of vision models' ops and of attention, in files of their own,
# join TABLE when this module is imported (they import its helpers).
import torch_export_ops_attention  # noqa: E402,F401
import torch_export_ops_extrema  # noqa: E402,F401
import torch_export_ops_moe  # noqa: E402,F401
import torch_export_ops_random  # noqa: E402,F401
import torch_export_ops_rnn  # noqa: E402,F401
import torch_export_ops_vision  # noqa: E402,F401
