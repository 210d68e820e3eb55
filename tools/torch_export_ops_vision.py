"""torch_export_ops.py's entries for the ops of vision models: batch
normalisation, convolution, pooling, the hard activations (MobileNetV3),
and Swin's table reads, rolls and padding. Each maps to remat's ops or
fails naming the attribute it does not support (torch_export_ops.py's
docstring lists them all)."""

import numpy as np
import torch

from torch_export_lower import Const, Live
from torch_export_ops import _axis, _binary, _ints, _live, _reshape, _scalar, _slice, op
from torch_export_program import _ident


@op("hardsigmoid.default")
def _hardsigmoid(ctx, x):
    """relu6(x + 3) / 6, as PyTorch defines it (MobileNetV3's gates)."""
    shifted = _binary(ctx, "add", x, 3.0)
    return _binary(ctx, "div", ctx.emit("hardtanh", [shifted.id], x.shape, _ints([0, 6])), 6.0)


@op("hardswish.default")
def _hardswish(ctx, x):
    """x * relu6(x + 3) / 6, as PyTorch defines it; its gradient is remat's
    of that composition (PyTorch's hardswish_backward differs only at the
    kinks x = -3 and x = 3)."""
    return ctx.emit("mul", [_live(ctx, x), _hardsigmoid(ctx, x).id], x.shape)


@op("index.Tensor")
def _index(ctx, x, indices):
    """x[..., idx, ...] by tensors of constant integer indices: one (Swin's
    relative position bias read from its table), or several on adjacent
    axes whose broadcast is an outer product, each varying along one axis
    of it in order (nearest upsampling: x[:, :, h[:, None], w]), read as
    one gather per axis; any other pattern as a gather of single elements."""
    axes = [i for i, t in enumerate(indices) if t is not None]
    described = ["%s" % (None if t is None else type(t).__name__) for t in indices]
    if not axes or any(ctx.live(indices[a]) or not isinstance(indices[a], Const)
                       or indices[a].tensor.dtype in (torch.bool, torch.uint8) for a in axes):
        ctx.fail("indexing by %s (remat's: tensors of integer indices fixed at export)" % described)
    if len(axes) == 1:
        return _gather_axis(ctx, x, axes[0], indices[axes[0]].tensor, tuple(ctx.out_shape()))
    vectors = _outer_factors([indices[a].tensor for a in axes])
    if vectors is None or axes != list(range(axes[0], axes[0] + len(axes))):
        # Any other pattern (a diagonal, axes apart): PyTorch's own indexing
        # of x's element numbers says which element each output reads.
        with torch.no_grad():
            flat = torch.arange(int(np.prod(x.shape))).reshape(x.shape)[tuple(
                slice(None) if t is None else t.tensor for t in indices)]
        return _flat_gather(ctx, x, flat, tuple(ctx.out_shape()))
    y = x
    for a, v in zip(axes, vectors):
        shape = list(y.shape)
        shape[a] = v.numel()
        y = _gather_axis(ctx, y, a, v, tuple(shape))
    return y


@op("gather.default")
def _gather(ctx, x, dim, index, sparse_grad=False):
    """torch.gather by constant indices (Funnel's relative shift): the
    elements torch.gather itself picks from x's element numbers."""
    if ctx.live(index) or not isinstance(index, Const):
        ctx.fail("gather by indices computed from the model's values (remat's: indices fixed at export)")
    n = x.shape[_axis(dim, len(x.shape))] if x.shape else 1
    if index.tensor.numel() and (int(index.tensor.min()) < -n or int(index.tensor.max()) >= n):
        ctx.fail("gather(dim=%r) by an index outside [-%d, %d) of a %s value" % (dim, n, n, tuple(x.shape)))
    with torch.no_grad():
        flat = torch.gather(torch.arange(int(np.prod(x.shape))).reshape(x.shape), dim, index.tensor)
    return _flat_gather(ctx, x, flat, tuple(ctx.out_shape()))


@op("as_strided.default")
def _as_strided(ctx, x, size, stride, storage_offset=None):
    """x.as_strided(...) as the trace saw it run: the element of x each
    output element reads is noted from x's real strides and storage offset
    (torch_export_trace.py). Every element in order is a reshape (adaptive
    pooling to x's own size); any other pattern, overlapping windows
    included (HaloNet's), a gather of those elements, whose gradient adds
    every read of an element."""
    index = ctx.call.note
    if not isinstance(index, torch.Tensor):
        ctx.fail("as_strided(size=%s, stride=%s, storage_offset=%s) of a %s value that reads storage outside "
                 "the value's own elements" % (list(size), list(stride), storage_offset, tuple(x.shape)))
    numel = int(np.prod(x.shape))
    if index.numel() == numel and torch.equal(index.reshape(-1), torch.arange(numel)):
        out = tuple(ctx.out_shape())
        return x if out == tuple(x.shape) else ctx.emit("reshape", [_live(ctx, x)], out, _ints(out))
    return _flat_gather(ctx, x, index, tuple(ctx.out_shape()))


@op("unfold.default")
def _unfold(ctx, x, dim, size, step):
    """x.unfold(dim, size, step) (sliding windows): a gather of the elements
    each window reads."""
    with torch.no_grad():
        flat = torch.arange(int(np.prod(x.shape))).reshape(x.shape).unfold(dim, size, step)
    return _flat_gather(ctx, x, flat, tuple(ctx.out_shape()))


def _flat_gather(ctx, x, flat, out):
    """out[i] = x.flatten()[flat[i]]: embedding's gather of rows of one
    element (a row read twice gets both gradients, in position order)."""
    numel = int(np.prod(x.shape))
    if numel >= 2 ** 31:
        ctx.fail("indexing a value of %d elements (remat's ids are 32-bit)" % numel)
    table = _reshape(ctx, _live(ctx, x), x.shape, (numel, 1))
    ids = ctx.const_input(flat.reshape(-1).to(torch.int32).contiguous(), "index")
    rows = ctx.emit("embedding", [table, ids], (flat.numel(), 1)).id
    return Live(ctx.body, _reshape(ctx, rows, (flat.numel(), 1), out), out)


def _outer_factors(tensors):
    """The vectors v_j with tensors broadcast equal to v_0[:, None, ...],
    v_1[None, :, ...], ... (each index tensor varies along its own axis of
    the broadcast only, in order), or None."""
    try:
        b = torch.broadcast_tensors(*tensors)
    except RuntimeError:
        return None
    if b[0].dim() != len(tensors):
        return None
    vectors = []
    for j, t in enumerate(b):
        v = t[tuple(slice(None) if i == j else 0 for i in range(t.dim()))]
        view = [1] * t.dim()
        view[j] = -1
        if not torch.equal(t, v.reshape(view).expand(t.shape)):
            return None
        vectors.append(v)
    return vectors


def _gather_axis(ctx, x, k, idx, out):
    """x's axis k read at the integer indices idx (any shape, its axes where
    axis k was): embedding's row gather on that axis moved to the front, so
    that a row read twice gets both gradients."""
    shape = list(x.shape)
    n = shape[k]
    if idx.numel() and (int(idx.min()) < -n or int(idx.max()) >= n):
        ctx.fail("an index outside [-%d, %d) on axis %d of a %s value" % (n, n, k, tuple(shape)))
    ids = ctx.const_input((idx % n).to(torch.int32).contiguous(), "index")
    front = [k] + [i for i in range(len(shape)) if i != k]
    xid = _live(ctx, x)
    moved = [shape[i] for i in front]
    if k:
        xid = ctx.emit("permute", [xid], moved, _ints(front)).id
    rest = int(np.prod(moved[1:]))
    table = _reshape(ctx, xid, moved, (n, rest))
    rows = tuple(idx.shape) + (rest,)
    y = ctx.emit("embedding", [table, ids], rows).id
    gathered = tuple(idx.shape) + tuple(moved[1:])
    y = _reshape(ctx, y, rows, gathered)
    if not k:
        return Live(ctx.body, y, out)
    # Back to x's order: the index's axes where axis k was.
    m = len(idx.shape)
    perm = [m + i for i in range(k)] + list(range(m)) + [m + i for i in range(k, len(shape) - 1)]
    return ctx.emit("permute", [y], out, _ints(perm))


@op("roll.default")
def _roll(ctx, x, shifts, dims=()):
    """torch.roll on given axes (Swin's shifted windows): the two slices of
    each axis in the other order."""
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(dims) != len(shifts) or not dims:
        ctx.fail("roll(shifts=%s, dims=%s) (remat's: one shift per axis named)" % (shifts, dims))
    xid, shape = _live(ctx, x), list(x.shape)
    for shift, dim in zip(shifts, dims):
        axis = _axis(dim, len(shape))
        n = shape[axis]
        s = int(shift) % n
        if s:
            tail = _slice(ctx, xid, shape, axis, n - s, s).id
            head = _slice(ctx, xid, shape, axis, 0, n - s).id
            xid = ctx.emit("cat", [tail, head], shape, _ints([axis])).id
    return Live(ctx.body, xid, shape)


def _join_constant(ctx, xid, shape, axis, amount, value, before, hint):
    """x with `amount` rows of `value` joined on `axis` before or after it
    (a constant input, so no gradient is taken for it); `shape` grows."""
    fill = list(shape)
    fill[axis] = amount
    cid = ctx.const_input(torch.full(fill, float(value)), hint)
    shape[axis] += amount
    return ctx.emit("cat", [cid, xid] if before else [xid, cid], shape, _ints([axis])).id


@op("constant_pad_nd.default")
def _pad(ctx, x, pad, value=0):
    """F.pad with a constant (Swin's window padding, TF-style "same"
    convolutions): constants joined by cat, a negative pad a slice."""
    v = _scalar(ctx, value)
    if v is None:
        ctx.fail("constant_pad_nd with a value %r" % (value,))
    xid, shape = _live(ctx, x), list(x.shape)
    for i in range(len(pad) // 2):
        axis = len(shape) - 1 - i
        for before, amount in ((True, int(pad[2 * i])), (False, int(pad[2 * i + 1]))):
            if amount < 0:
                xid = _slice(ctx, xid, shape, axis, -amount if before else 0, shape[axis] + amount).id
                shape[axis] += amount
            elif amount > 0:
                xid = _join_constant(ctx, xid, shape, axis, amount, v, before, "pad")
    return Live(ctx.body, xid, shape)


# Batch normalisation, convolution, pooling.
@op("native_batch_norm.default", "_native_batch_norm_legit.default", "_native_batch_norm_legit_functional.default",
    "_native_batch_norm_legit.no_stats")
def _batch_norm(ctx, x, weight, bias, *rest):
    """Training-mode batch norm of x (N, C, ...): rank 2 and 4 as they are,
    rank 3 (BatchNorm1d over a sequence, timm's weight standardization of
    a conv's weight) and 5 seen as (N, C, L, 1) and (N, C, D H, W); a
    missing weight or bias is a constant 1 or 0 (an input of the program)."""
    if len(rest) == 5:
        running_mean, running_var, training, momentum, eps = rest
    else:  # _native_batch_norm_legit.no_stats
        (training, momentum, eps), running_mean, running_var = rest, None, None
    if not training:
        ctx.fail("batch_norm in eval mode (remat's normalizes with the batch's statistics: export in train())")
    shape = tuple(x.shape)
    if len(shape) < 2 or len(shape) > 5 or 0 in shape:
        ctx.fail("batch_norm of a %s value (remat's: (N, C) or (N, C, H, W); rank 3 and 5 are reshaped to 4)"
                 % (shape,))
    if momentum is None and (running_mean is not None or running_var is not None):
        ctx.fail("batch_norm with momentum=None (a cumulative average; remat's running statistics take a momentum)")
    seen = shape if len(shape) in (2, 4) else shape + (1,) if len(shape) == 3 else \
        (shape[0], shape[1], shape[2] * shape[3], shape[4])
    xid = _reshape(ctx, _live(ctx, x), shape, seen)
    channels = shape[1]
    for stat, op_name in ((running_mean, "batch_norm_running_mean"), (running_var, "batch_norm_running_var")):
        if stat is None:
            continue
        sid = ctx.id(stat)
        new = ctx.emit(op_name, [xid, sid], None, " scalar=%r" % float(momentum))
        ctx.emit("state", [new.id], None, ' name="%s"' % _ident(stat.value.name), root=True)
    gamma = ctx.id(weight) if weight is not None else ctx.const_input(torch.ones(channels), "ones")
    beta = ctx.id(bias) if bias is not None else ctx.const_input(torch.zeros(channels), "zeros")
    y = ctx.emit("batch_norm", [xid, gamma, beta], seen, " scalar=%r" % float(eps))
    out = Live(ctx.body, _reshape(ctx, y.id, seen, shape), shape) if seen != shape else y
    return [out, None, None]


@op("convolution.default")
def _convolution(ctx, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed or len(stride) not in (1, 2):
        ctx.fail("convolution(transposed=%s) of %d spatial axes (remat's: conv2d, and conv1d as conv2d of "
                 "height 1)" % (transposed, len(stride)))
    if len(stride) == 1:
        # conv1d (Whisper's and wav2vec2's front ends, Mamba's causal conv):
        # conv2d over (N, C, 1, L) with a (O, C/G, 1, K) kernel.
        n, c, length = x.shape
        o, cg, k = w.shape
        out = tuple(ctx.out_shape())
        xid = _reshape(ctx, ctx.id(x), x.shape, (n, c, 1, length))
        wid = _reshape(ctx, ctx.id(w), w.shape, (o, cg, 1, k))
        ints = [1, int(stride[0]), 0, int(padding[0]), 1, int(dilation[0]), int(groups)]
        inputs = [xid, wid] + ([ctx.id(bias)] if bias is not None else [])
        y = ctx.emit("conv2d" if bias is None else "conv2d_bias", inputs, (n, o, 1, out[2]), _ints(ints))
        return Live(ctx.body, _reshape(ctx, y.id, (n, o, 1, out[2]), out), out)
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if sh == sw and ph == pw and dh == dw == 1 and groups == 1:
        ints = [sh, ph]
    else:
        ints = [sh, sw, ph, pw, dh, dw, groups]
    # x may be a constant (XCiT's Fourier position features through a
    # learned conv): an input of the program, the weight's gradient reads it.
    inputs = [ctx.id(x), ctx.id(w)] + ([ctx.id(bias)] if bias is not None else [])
    return ctx.emit("conv2d" if bias is None else "conv2d_bias", inputs, ctx.out_shape(), _ints(ints))


@op("im2col.default")
def _im2col(ctx, x, kernel, dilation, padding, stride):
    """F.unfold (TNT's pixel embedding): each window's taps as channels,
    (N, C*kh*kw, L), as a depthwise conv2d of one-hot kernels, one output
    channel per tap in unfold's order (c, i, j); each output is one input
    element times 1 plus zeros, so values and gradients are unfold's."""
    if len(x.shape) != 4:
        ctx.fail("im2col of a rank-%d value (remat's: NCHW)" % len(x.shape))
    n, c = x.shape[:2]
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel, dilation, padding, stride
    taps = torch.zeros(c * kh * kw, 1, kh, kw)
    for ch in range(c):
        for m in range(kh * kw):
            taps[ch * kh * kw + m, 0, m // kw, m % kw] = 1.0
    oh = (x.shape[2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    spatial = (n, c * kh * kw, oh, ow)
    y = ctx.emit("conv2d", [_live(ctx, x), ctx.const_input(taps, "taps")], spatial,
                 _ints([sh, sw, ph, pw, dh, dw, c]))
    out = tuple(ctx.out_shape())
    return Live(ctx.body, _reshape(ctx, y.id, spatial, out), out)


@op("col2im.default")
def _col2im(ctx, x, output_size, kernel, dilation, padding, stride):
    """F.fold (VOLO's outlook attention), F.unfold's adjoint: each window's
    taps added back where they came from. Tap (i, j)'s (N, C, OH, OW)
    values are spread to rows i*dh + sh*oh and columns j*dw + sw*ow of the
    padded (N, C, H + 2ph, W + 2pw) canvas (zeros joined between, before
    and after), the taps' canvases added in tap order, the padding cut."""
    if len(x.shape) != 3:
        ctx.fail("col2im of a rank-%d value (remat's: (N, C*kh*kw, L))" % len(x.shape))
    (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = output_size, kernel, dilation, padding, stride
    n, ck, length = x.shape
    k = kh * kw
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if ck % k or oh * ow != length:
        ctx.fail("col2im of %s to %s with a %dx%d kernel (the blocks do not tile it)"
                 % (tuple(x.shape), (h, w), kh, kw))
    c = ck // k
    taps = _reshape(ctx, _live(ctx, x), x.shape, (n, c, k, oh, ow))
    total = None
    for m in range(k):
        i, j = divmod(m, kw)
        tap = _reshape(ctx, _slice(ctx, taps, (n, c, k, oh, ow), 2, m, 1).id, (n, c, 1, oh, ow), (n, c, oh, ow))
        shape = [n, c, oh, ow]
        tap = _spread(ctx, tap, shape, 2, sh, i * dh, h + 2 * ph)
        tap = _spread(ctx, tap, shape, 3, sw, j * dw, w + 2 * pw)
        total = tap if total is None else ctx.emit("add", [total, tap], tuple(shape)).id
    for axis, pad, size in ((2, ph, h), (3, pw, w)):
        if pad:
            total = _slice(ctx, total, shape, axis, pad, size).id
            shape[axis] = size
    return Live(ctx.body, total, tuple(shape))


def _spread(ctx, xid, shape, axis, step, offset, size):
    """x's rows on `axis` put at rows offset, offset + step, ... of `size`
    rows, zeros elsewhere; `shape` becomes x's new shape."""
    rows = shape[axis]
    if step > 1 and rows > 1:
        wide = shape[:axis + 1] + [1] + shape[axis + 1:]
        xid = _join_constant(ctx, _reshape(ctx, xid, shape, wide), wide, axis + 1, step - 1, 0.0, False, "gap")
        shape[axis] = rows * step
        xid = _reshape(ctx, xid, wide, shape)
        xid = _slice(ctx, xid, shape, axis, 0, (rows - 1) * step + 1).id
        shape[axis] = (rows - 1) * step + 1
    if offset:
        xid = _join_constant(ctx, xid, shape, axis, offset, 0.0, True, "gap")
    if size > shape[axis]:
        xid = _join_constant(ctx, xid, shape, axis, size - shape[axis], 0.0, False, "gap")
    return xid


@op("max_pool2d_with_indices.default")
def _max_pool(ctx, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    def square(v, what):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        if len(v) == 2 and v[0] != v[1]:
            ctx.fail("max_pool2d with a %s of %s (remat's is square)" % (what, v))
        return int(v[0])
    k = square(kernel, "kernel")
    s = square(stride, "stride") if stride else k
    p = square(padding, "padding")
    if square(dilation, "dilation") != 1:
        ctx.fail("max_pool2d(dilation=%r) (remat's: dilation 1)" % (dilation,))
    xid, shape = _live(ctx, x), list(x.shape)
    if ceil_mode:
        # ceil_mode's last window hangs over the bottom and right edges, its
        # outside ignored: rows and columns of -inf appended there give the
        # same windows under floor mode, and -inf never wins a window that
        # starts inside the input (PyTorch starts every window there).
        oh, ow = ctx.out_shape()[2:]
        for axis, out in ((2, oh), (3, ow)):
            extra = (out - 1) * s + k - (shape[axis] + 2 * p)
            if extra > 0:
                xid = _join_constant(ctx, xid, shape, axis, extra, float("-inf"), False, "ceil_mode_pad")
    return [ctx.emit("max_pool2d", [xid], ctx.out_shape(), _ints([k, s, p])), None]


@op("avg_pool2d.default")
def _avg_pool(ctx, x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """Windows that tile the input (stride = kernel, no padding, as many as
    fit): adaptive average pooling over the rows and columns they cover,
    which has those windows exactly (DenseNet's transitions). Any other
    (PoolFormer's 3x3 stride 1 padded, NFNet's ceil_mode): the windows'
    sums as a depthwise conv2d with a constant kernel of ones (zero padding,
    zero rows joined where ceil_mode adds a window), divided by a constant
    of each window's divisor, the one PyTorch's avg_pool2d uses (found by
    pooling ones with the same arguments)."""
    def pair(v):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return [int(v[0]), int(v[-1])]
    k = pair(kernel)
    s = pair(stride) if stride else k
    p = pair(padding)
    if len(x.shape) != 4:
        ctx.fail("avg_pool2d of a rank-%d value (remat's: NCHW)" % len(x.shape))
    xid, shape = _live(ctx, x), list(x.shape)
    out = ctx.out_shape()
    if s == k and p == [0, 0] and divisor_override is None and all(o * kk <= d for o, kk, d in zip(out[2:], k, shape[2:])):
        for axis, o, kk in ((2, out[2], k[0]), (3, out[3], k[1])):
            if shape[axis] != o * kk:  # floor mode drops the rows no window covers
                xid = _slice(ctx, xid, shape, axis, 0, o * kk).id
                shape[axis] = o * kk
        return ctx.emit("adaptive_avg_pool2d", [xid], out, _ints(out[2:]))
    n, c, h, w = shape
    for axis, o, kk, ss, pp in ((2, out[2], k[0], s[0], p[0]), (3, out[3], k[1], s[1], p[1])):
        if pp:
            xid = _join_constant(ctx, xid, shape, axis, pp, 0.0, True, "pad")
            xid = _join_constant(ctx, xid, shape, axis, pp, 0.0, False, "pad")
        reach = (o - 1) * ss + kk  # the rows the last window ends at
        if reach > shape[axis]:  # ceil_mode: a last window that runs past the input
            xid = _join_constant(ctx, xid, shape, axis, reach - shape[axis], 0.0, False, "ceil_mode_pad")
        elif reach < shape[axis]:  # rows no window reads
            xid = _slice(ctx, xid, shape, axis, 0, reach).id
            shape[axis] = reach
    ones = ctx.const_input(torch.ones(c, 1, k[0], k[1]), "window")
    sums = ctx.emit("conv2d", [xid, ones], out, _ints([s[0], s[1], 0, 0, 1, 1, c]))
    with torch.no_grad():
        plane = torch.ones(1, 1, h, w, dtype=torch.float64)
        args = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode)
        mean = torch.nn.functional.avg_pool2d(plane, count_include_pad=count_include_pad,
                                              divisor_override=divisor_override, **args)
        count = torch.nn.functional.avg_pool2d(plane, divisor_override=1, **args)
    if tuple(mean.shape[2:]) != tuple(out[2:]) or not bool((mean > 0).all()):
        ctx.fail("avg_pool2d(kernel=%s, stride=%s, padding=%s, ceil_mode=%s) of %s to %s: a window with no "
                 "element of the input" % (k, s, p, ceil_mode, (h, w), tuple(out[2:])))
    divisor = torch.round(count / mean).to(torch.float32)
    return ctx.emit("div", [sums.id, ctx.const_input(divisor, "divisor")], out)


@op("_adaptive_avg_pool2d.default", "adaptive_avg_pool2d.default")
def _adaptive_avg_pool(ctx, x, size):
    out = ctx.out_shape()
    if tuple(size) == (1, 1):
        g = ctx.emit("global_avg_pool", [_live(ctx, x)], x.shape[:2])
        return Live(ctx.body, _reshape(ctx, g.id, x.shape[:2], out), out)
    return ctx.emit("adaptive_avg_pool2d", [_live(ctx, x)], out, _ints(size))
