"""torch_export_ops.py's entry for recurrent layers: nn.LSTM as PyTorch's
CPU build runs it, one aten.mkldnn_rnn_layer per layer and direction
(Sequencer's bidirectional LSTMs over rows and columns), unrolled into
remat's matmul, sigmoid, tanh, mul and add, step by step.

The program is the LSTM's definition (PyTorch's nn.LSTM docs):
  gates = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh, split into i, f, g, o
  c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g),  h_t = sigmoid(o) tanh(c_t)
with the input's projection done for every step in one matmul, and the
steps walked last to first for the reverse direction. Its values are that
arithmetic in float32; the mkldnn kernel's differ by roundoff."""

from torch_export_lower import Const, Live
from torch_export_ops import _ints, _permute, _reshape, _slice, op

_LSTM = 2  # mkldnn's mode numbers: 0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU


def _is_zero(x):
    """Whether x is a constant of zeros (nn.LSTM's default h0 and c0)."""
    return isinstance(x, Const) and not bool(x.tensor.any())


def _stack_steps(ctx, steps, n, h):
    """(T, N, H) from T values of (N, H): pairs joined by cat, a tree deep
    log2(T), so that no step is copied T times."""
    parts = [(_reshape(ctx, s.id, (n, h), (1, n, h)), 1) for s in steps]
    while len(parts) > 1:
        joined = []
        for k in range(0, len(parts) - 1, 2):
            (a, ta), (b, tb) = parts[k], parts[k + 1]
            joined.append((ctx.emit("cat", [a, b], (ta + tb, n, h), _ints([0])).id, ta + tb))
        if len(parts) % 2:
            joined.append(parts[-1])
        parts = joined
    return Live(ctx.body, parts[0][0], (len(steps), n, h))


@op("mkldnn_rnn_layer.default")
def _lstm_layer(ctx, x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode, hidden_size, num_layers,
                has_biases, bidirectional, batch_first, train):
    """One layer and direction of nn.LSTM over a time-major (T, N, I) input
    (PyTorch transposes a batch-first one before it): the outputs (T, N, H),
    the last h and c (N, H)."""
    if mode != _LSTM:
        ctx.fail("mkldnn_rnn_layer(mode=%d) (remat's: the LSTM, mode 2)" % mode)
    if batch_sizes:
        ctx.fail("an LSTM over a packed sequence (batch_sizes=%s; remat's: sequences of one length)"
                 % list(batch_sizes))
    if len(x.shape) != 3:
        ctx.fail("an LSTM over a %s input (remat's: time-major (T, N, I))" % (tuple(x.shape),))
    steps, n, features = (int(d) for d in x.shape)
    if steps == 0:
        ctx.fail("an LSTM over a sequence of 0 steps")
    h = int(hidden_size)
    gates = 4 * h
    # Every step's input projection at once: (T N, I) x (I, 4H).
    xs = _reshape(ctx, ctx.id(x), x.shape, (steps * n, features))
    gx = ctx.emit("matmul", [xs, _permute(ctx, w_ih, [1, 0]).id], (steps * n, gates)).id
    if has_biases:
        bias = ctx.emit("add", [ctx.id(b_ih), ctx.id(b_hh)], (gates,)).id
        gx = ctx.emit("bias_add", [gx, bias], (steps * n, gates)).id
    gx = _reshape(ctx, gx, (steps * n, gates), (steps, n, gates))
    w_hh_t = _permute(ctx, w_hh, [1, 0]).id
    h_prev = None if _is_zero(hx) else ctx.id(hx)
    c_prev = None if _is_zero(cx) else ctx.id(cx)
    outputs = [None] * steps
    for t in (reversed(range(steps)) if reverse else range(steps)):
        g = ctx.emit("select", [gx], (n, gates), _ints([0, t])).id
        if h_prev is not None:
            g = ctx.emit("add", [g, ctx.emit("matmul", [h_prev, w_hh_t], (n, gates)).id], (n, gates)).id
        i, f, cell, o = (_slice(ctx, g, (n, gates), 1, k * h, h).id for k in range(4))
        i, f, o = (ctx.emit("sigmoid", [v], (n, h)).id for v in (i, f, o))
        new = ctx.emit("mul", [i, ctx.emit("tanh", [cell], (n, h)).id], (n, h)).id
        c = new if c_prev is None else ctx.emit("add", [ctx.emit("mul", [f, c_prev], (n, h)).id, new], (n, h)).id
        out = ctx.emit("mul", [o, ctx.emit("tanh", [c], (n, h)).id], (n, h))
        outputs[t] = out
        h_prev, c_prev = out.id, c
    return [_stack_steps(ctx, outputs, n, h), Live(ctx.body, h_prev, (n, h)), Live(ctx.body, c_prev, (n, h)), None]
