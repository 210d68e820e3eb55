"""torch_export_ops.py's entry for scaled dot-product attention (PyTorch's
fused CPU kernel, which Hugging Face's and torchvision's attention call),
written as its definition in remat's ops: grouped-query heads by expand,
causal and given masks, dropout on the probabilities."""

import math

import torch

from torch_export_lower import Const, Live
from torch_export_ops import _binary, _ints, _mask, _reshape, op


def _batched(ctx, xid, shape):
    """(B, H, T, D) as (B*H, T, D)."""
    return _reshape(ctx, xid, shape, (shape[0] * shape[1],) + tuple(shape[2:]))


def _heads(ctx, x, heads):
    """k or v (B, Hkv, S, D) read by `heads` query heads: each kv head
    repeated for its group (grouped-query attention), by expand."""
    b, h, s, d = x.shape
    xid = ctx.id(x)
    if h == heads:
        return xid
    if heads % h:
        ctx.fail("attention with %d query heads and %d key/value heads" % (heads, h))
    g = heads // h
    y = _reshape(ctx, xid, x.shape, (b, h, 1, s, d))
    y = ctx.emit("expand", [y], (b, h, g, s, d), _ints((b, h, g, s, d))).id
    return _reshape(ctx, y, (b, h, g, s, d), (b, heads, s, d))


@op("_scaled_dot_product_flash_attention_for_cpu.default")
def _sdpa(ctx, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """softmax(q k^T * scale + mask) v, as its definition."""
    if len(q.shape) != 4 or len(k.shape) != 4:
        ctx.fail("scaled_dot_product_attention of q %s, k %s (remat's: (B, H, T, D))" % (q.shape, k.shape))
    b, h, t, d = q.shape
    s_len, dv = k.shape[2], v.shape[3]
    kid, vid = _heads(ctx, k, h), _heads(ctx, v, h)
    kt = ctx.emit("permute", [kid], (b, h, d, s_len), _ints([0, 1, 3, 2])).id
    scores = (b, h, t, s_len)
    s = ctx.emit("matmul", [_batched(ctx, ctx.id(q), q.shape), _batched(ctx, kt, (b, h, d, s_len))],
                 (b * h, t, s_len)).id
    s = _reshape(ctx, s, (b * h, t, s_len), scores)
    c = float(scale) if scale is not None else 1.0 / math.sqrt(d)
    s = ctx.emit("scale", [s], scores, " scalar=%r" % c).id
    if is_causal:
        causal = torch.ones(t, s_len, dtype=torch.bool).tril().logical_not()
        s = ctx.emit("masked_fill", [s, ctx.const_input(causal.expand(scores).to(torch.int32).contiguous(),
                                                        "causal_mask")], scores, " scalar=-inf").id
    if attn_mask is not None:
        if isinstance(attn_mask, Const) and attn_mask.tensor.dtype == torch.bool:
            s = ctx.emit("masked_fill", [s, _mask(ctx, attn_mask, scores, invert=True)], scores, " scalar=-inf").id
        else:
            s = _binary(_ScoresCtx(ctx, scores), "add", Live(ctx.body, s, scores), attn_mask).id
    p = ctx.emit("softmax", [s], scores).id
    if dropout_p:
        p = ctx.dropout(p, float(dropout_p), scores).id
    y = ctx.emit("matmul", [_batched(ctx, p, scores), _batched(ctx, vid, (b, h, s_len, dv))], (b * h, t, dv)).id
    return [Live(ctx.body, _reshape(ctx, y, (b * h, t, dv), (b, h, t, dv)), (b, h, t, dv)), None]


class _ScoresCtx:
    """ctx with out_shape() the scores' (for a float mask added to them)."""

    def __init__(self, ctx, shape):
        self._ctx, self._shape = ctx, shape

    def out_shape(self, i=0):
        return self._shape

    def __getattr__(self, name):
        return getattr(self._ctx, name)
