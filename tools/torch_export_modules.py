"""tools/torch_export.py's nn.Module mapping: a call of one of torch.nn's
modules (a leaf of the trace) as remat's ops."""

import numpy as np
import torch.nn as nn

from torch_export_program import _INTEGER, _ident, _quote

# Tensors the model uses both as an nn.Linear's weight and otherwise (a tied
# embedding): written as they are, with a transpose op for the Linear.
_TIED = set()


def _tied_linear_weights(root):
    """ids of the nn.Linear weights the model also uses otherwise (a token
    embedding tied to the LM head)."""
    linear, other = set(), set()
    for m in root.modules():
        for n, p in m.named_parameters(recurse=False):
            (linear if isinstance(m, nn.Linear) and n == "weight" else other).add(id(p))
    return linear & other


class _ModuleOps:
    """The module calls of a _Body (torch_export_body.py)."""

    def module_op(self, node):
        """The program id of a call_module node's value."""
        m = self.mods[node.target]
        x = node.args[0]
        if isinstance(m, nn.Linear):
            return self.linear(node, m, x)
        elif isinstance(m, nn.ReLU):
            return self.emit("relu", [self.env[x]], node)
        elif isinstance(m, nn.GELU):
            return self.emit("gelu" if m.approximate == "tanh" else "gelu_erf", [self.env[x]], node)
        elif isinstance(m, nn.LayerNorm):
            if m.eps != 1e-5 or not m.elementwise_affine or len(m.normalized_shape) != 1:
                self.fail(node, "nn.LayerNorm(eps=%g, elementwise_affine=%s, shape %s) (remat's: eps 1e-5, affine, last axis)"
                          % (m.eps, m.elementwise_affine, tuple(m.normalized_shape)))
            return self.emit("layer_norm", [self.env[x], self.param(m, "weight", node), self.param(m, "bias", node)], node)
        elif isinstance(m, nn.Softmax):
            if m.dim not in (-1, len(self.shape(x)) - 1):
                self.fail(node, "nn.Softmax(dim=%r) (remat's softmax is over the last axis)" % m.dim)
            return self.emit("softmax", [self.env[x]], node)
        elif isinstance(m, nn.Identity):
            return self.env[x]
        elif isinstance(m, nn.Embedding):
            if m.padding_idx is not None or m.max_norm is not None or m.scale_grad_by_freq or m.sparse:
                self.fail(node, "nn.Embedding(padding_idx=%r, max_norm=%r, scale_grad_by_freq=%s, sparse=%s) "
                          "(remat's embedding: a plain table)" % (m.padding_idx, m.max_norm,
                                                                  m.scale_grad_by_freq, m.sparse))
            if self.dtype(x) not in _INTEGER:
                self.fail(node, "nn.Embedding of a %s input (ids are integers)" % self.dtype(x))
            return self.emit("embedding", [self.param(m, "weight", node), self.env[x]], node)
        elif isinstance(m, nn.Dropout):
            return self.dropout(node, m.p, m.training, x)
        elif isinstance(m, nn.Conv2d):
            return self.conv2d(node, m, x)
        elif isinstance(m, nn.BatchNorm2d):
            return self.batch_norm(node, m, x)
        elif isinstance(m, nn.MaxPool2d):
            return self.max_pool2d(node, m, x)
        elif isinstance(m, nn.AdaptiveAvgPool2d):
            size = m.output_size if isinstance(m.output_size, tuple) else (m.output_size,) * 2
            if tuple(size) != (1, 1):
                self.fail(node, "nn.AdaptiveAvgPool2d(%r) (remat's global_avg_pool: output size 1)" % (m.output_size,))
            return self.emit("reshape", [self.emit("global_avg_pool", [self.env[x]], node, typed=False)], node,
                             " ints=[%s]" % ",".join(str(d) for d in self.shape(node)))
        elif isinstance(m, nn.CrossEntropyLoss):
            return self.cross_entropy(node, m.weight, m.ignore_index, m.reduction,
                                      m.label_smoothing, node.args[0], node.args[1])
        else:
            self.fail(node, "nn.%s" % type(m).__name__)

    def linear(self, node, m, x):
        """nn.Linear on (..., in): matmul with W^T (written transposed, or a
        transpose op when W is tied to another use), + bias."""
        sx = self.shape(x)
        if sx is None or len(sx) < 2:
            self.fail(node, "nn.Linear on a rank-%s input (remat's matmul needs (..., in) with a row axis)"
                      % (len(sx) if sx is not None else "?"))
        if id(m.weight) in _TIED:
            w = self.emit("transpose", [self.param(m, "weight", node)], node, out_shape=tuple(m.weight.t().shape))
        else:
            w = self.param(m, "weight", node, transposed=True)
        rows = int(np.prod(sx[:-1]))
        xr = self.env[x] if len(sx) == 2 else self.reshaped(self.env[x], (rows, sx[-1]), node)
        y = self.emit("matmul", [xr, w], node, out_shape=(rows, m.out_features))
        if m.bias is not None:
            y = self.emit("bias_add", [y, self.param(m, "bias", node)], node, out_shape=(rows, m.out_features))
        return y if len(sx) == 2 else self.reshaped(y, self.shape(node), node)

    def pair(self, value, what, node):
        """A square attribute (k or (k, k)) as one int."""
        v = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
        if len(v) != 2 or v[0] != v[1]:
            self.fail(node, "%s %r (remat's is square)" % (what, value))
        return int(v[0])

    def conv2d(self, node, m, x):
        if m.bias is not None or m.groups != 1 or self.pair(m.dilation, "dilation", node) != 1 \
                or m.padding_mode != "zeros" or isinstance(m.padding, str):
            self.fail(node, "nn.Conv2d(bias=%s, groups=%d, dilation=%r, padding=%r, padding_mode=%r) (remat's "
                      "conv2d: no bias, groups 1, dilation 1, zero padding given as a number)"
                      % (m.bias is not None, m.groups, m.dilation, m.padding, m.padding_mode))
        stride, pad = self.pair(m.stride, "stride", node), self.pair(m.padding, "padding", node)
        return self.emit("conv2d", [self.env[x], self.param(m, "weight", node)], node, " ints=[%d,%d]" % (stride, pad))

    def batch_norm(self, node, m, x):
        """nn.BatchNorm2d in training mode: the batch's statistics, and the new
        running ones as the state of its running_mean and running_var
        (engines/api/CONTRACT.md, state). num_batches_tracked, an integer
        counter that changes nothing when momentum is set, is not exported."""
        if not m.training:
            self.fail(node, "nn.BatchNorm2d in eval mode (remat's batch_norm normalizes with the batch's "
                      "statistics: export the model in train())")
        if not m.affine or not m.track_running_stats or m.momentum is None:
            self.fail(node, "nn.BatchNorm2d(affine=%s, track_running_stats=%s, momentum=%r) (remat's: affine, "
                      "running statistics, a momentum)" % (m.affine, m.track_running_stats, m.momentum))
        for stat, op in (("running_mean", "batch_norm_running_mean"), ("running_var", "batch_norm_running_var")):
            new = self.emit(op, [self.env[x], self.param(m, stat, node)], node, " scalar=%r" % float(m.momentum), typed=False)
            # The state op names the program's input: its id at the top level.
            name = _ident(self.tensor_path(getattr(m, stat), m, stat, node))
            self.emit("state", [new], node, " name=%s" % _quote(name), typed=False)
        return self.emit("batch_norm", [self.env[x], self.param(m, "weight", node), self.param(m, "bias", node)], node,
                         " scalar=%r" % float(m.eps))

    def max_pool2d(self, node, m, x):
        if self.pair(m.dilation, "dilation", node) != 1 or m.ceil_mode or m.return_indices:
            self.fail(node, "nn.MaxPool2d(dilation=%r, ceil_mode=%s, return_indices=%s) (remat's max_pool2d: "
                      "dilation 1, floor)" % (m.dilation, m.ceil_mode, m.return_indices))
        k = self.pair(m.kernel_size, "kernel_size", node)
        stride = self.pair(m.stride if m.stride is not None else m.kernel_size, "stride", node)
        return self.emit("max_pool2d", [self.env[x]], node, " ints=[%d,%d,%d]" % (k, stride, self.pair(m.padding, "padding", node)))
