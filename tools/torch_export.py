#!/usr/bin/env python3
"""Exports a PyTorch nn.Module as a remat program file (engines/api/program_text.h).

    from torch_export import export
    export(model, (x,), "out/")          # out/program.txt, out/<input>.npy

`export(module, example_inputs, out_dir, loss=None)` traces `module` with
torch.fx and writes out_dir/program.txt and one .npy per input of the
program: every parameter, buffer and tensor attribute the forward reads,
named by its full path in `module` ("layers.0.fc1.weight", "block.shift":
never its last name alone, so tensors of the same name in different modules
stay apart), and every example input (named by forward's argument). A tensor
reachable by two paths (a tied weight) is one input, under the first path
named_parameters() gives. Two inputs that would get one name are an
ExportError, never merged.
The program's value is the module's output, which must be a scalar; with
loss="sum" or loss="sum_of_squares" that reduction is appended.

Mapped (all float32, remat's ops; program.h):
  nn.Linear(x: (N, in))        matmul(x, W^T) [+ bias_add]; the parameter is
                               written transposed, as "<path>.weight.T" (in, out),
                               so that remat's gradient of it is PyTorch's, transposed
  nn.ReLU, relu                relu          nn.GELU(approximate='tanh')  gelu
  nn.GELU(), F.gelu (erf)       gelu_erf      F.log_softmax(dim=-1)   log_softmax
  nn.Embedding (plain)          embedding on integer ids
  nn.Dropout, F.dropout         dropout on the program's input dropout_seed (i32[]), a key
                               per dropout in export order: the contract's mask, not
                               PyTorch's; the identity in eval mode or with p = 0
  nn.LayerNorm(eps=1e-5, affine)  layer_norm  nn.Softmax(dim=-1), softmax(dim=-1)
  torch.sin, torch.cos          sin, cos     x * x, x ** 2, torch.square  square
  matmul, @ (rank 2 or 3)       matmul       .transpose(-2, -1), .t(), .mT  transpose
  +  (same shapes)              add          +  (a (C,) vector on (..., C))  bias_add
  -  (same shapes), torch.sub   sub          unary -, torch.neg      neg
  torch.exp                     exp          torch.log               log
  *  (same shapes)              mul          * or / by a Python number  scale
  .sum(), torch.sum (all axes)  sum          .mean() (all axes)  sum, then scale 1/n
  nn.Conv2d(bias=False, square stride/padding, groups 1)   conv2d (OIHW weights as they are)
  nn.BatchNorm2d, training mode  batch_norm with the batch's statistics; the new
                               running_mean and running_var (momentum, unbiased
                               variance) as the state of those buffers (state ops:
                               remat returns them, --dump writes state_<path>.npy);
                               num_batches_tracked is not exported
  nn.MaxPool2d(k, s, p)         max_pool2d   nn.AdaptiveAvgPool2d(1)  global_avg_pool
  torch.flatten, .view, .reshape  reshape to the traced shape   nn.Identity  (nothing)
  F.cross_entropy, nn.CrossEntropyLoss (mean, no weight)  cross_entropy; integer
                               example inputs (targets) are i32 inputs
  out += x                      add
  torch.utils.checkpoint.checkpoint(module, ...)   a checkpoint region (nothing_saveable)
  torch.utils.checkpoint.checkpoint_sequential(seq, segments, x)
                               consecutive regions, as torch 1.13 runs it: every
                               segment but the last checkpointed, the last inline;
                               remat's --schedule groups the regions into a chain
Anything else (another LayerNorm eps, softmax over another axis,
a checkpoint of something that is not an nn.Module, ...) raises ExportError
naming the module path and the op, every such use of the model in one
message (one line each); the exporter never writes a different graph.
"""

import operator
import os

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tcp
from torch.fx.passes.shape_prop import ShapeProp


class ExportError(Exception):
    pass


class _Unsupported(ExportError):
    """One node remat cannot take: recorded in _ERRORS, the export goes on."""


_REGIONS = []  # the callables of traced checkpoint calls, by index
# Dropout's seed, an i32[] input of the program (one tensor, so that every
# body that reads it is given the same input), and the last key given.
_DROPOUT_SEED = [torch.tensor(0, dtype=torch.int32)]
_DROPOUT_KEYS = [0]
_ERRORS = []  # what the model uses that remat cannot take, one message a node
_UNSUPPORTED = " is not supported by remat's op set (tools/torch_export.py lists what is)"


def _checkpoint_marker(index, *args):
    """What a traced checkpoint call becomes in the fx graph (runs the region)."""
    return _REGIONS[index](*args)


torch.fx.wrap("_checkpoint_marker")


def _trace(module, path):
    """torch.fx's graph of `module` (at `path` of the exported model), or an
    ExportError naming the module and what fx could not follow (never fx's
    raw TraceError or TypeError)."""
    try:
        return _Tracer().trace(module)
    except ExportError:
        raise
    except Exception as e:  # fx reports Python it cannot trace in several types
        hint = ""
        if "Proxy" in str(e) or "iterat" in str(e) or "bool" in str(e):
            hint = (" (Python that depends on a tensor's shape or value, such as `B, T = x.shape` "
                    "or `if x.sum() > 0`, cannot be traced symbolically by torch.fx)")
        raise ExportError("%s: torch.fx cannot trace %s.forward: %s: %s%s"
                          % (path or "<root>", type(module).__name__, type(e).__name__, e, hint))


class _Tracer(torch.fx.Tracer):
    """Keeps the modules remat maps as leaves; checkpoint calls become markers."""

    def is_leaf_module(self, m, qualname):
        if isinstance(m, (nn.Sequential, nn.ModuleList)):
            return False
        return type(m).__module__.startswith("torch.nn") or super().is_leaf_module(m, qualname)


class _Patched:
    """Replaces checkpoint and checkpoint_sequential, as the traced code names
    them (torch.utils.checkpoint.X, or a global of the module's source file),
    by versions that record regions instead of running them."""

    def __init__(self, root):
        self.root = root
        self.saved = []

    def __enter__(self):
        orig_cp, orig_seq = tcp.checkpoint, tcp.checkpoint_sequential

        def checkpoint(function, *args, use_reentrant=True, **kwargs):
            if kwargs:
                raise ExportError("checkpoint: keyword arguments %s are not supported" % sorted(kwargs))
            if not isinstance(function, nn.Module):
                raise ExportError("checkpoint of %r: only an nn.Module can be exported as a "
                                  "checkpoint region (wrap the function in one)" % (function,))
            _REGIONS.append(function)
            return _checkpoint_marker(len(_REGIONS) - 1, *args)

        def checkpoint_sequential(functions, segments, input, **kwargs):
            mods = list(functions.children()) if isinstance(functions, nn.Sequential) else list(functions)
            size = len(mods) // segments
            end = -1
            for start in range(0, size * (segments - 1), size):
                end = start + size - 1
                input = checkpoint(nn.Sequential(*mods[start:end + 1]), input)
            for m in mods[end + 1:]:
                input = m(input)
            return input

        replacements = {orig_cp: checkpoint, orig_seq: checkpoint_sequential}
        self.saved.append((tcp, "checkpoint", orig_cp))
        self.saved.append((tcp, "checkpoint_sequential", orig_seq))
        tcp.checkpoint, tcp.checkpoint_sequential = checkpoint, checkpoint_sequential
        for m in self.root.modules():
            g = getattr(type(m).forward, "__globals__", {})
            for k, v in list(g.items()):
                if any(v is o for o in replacements):
                    self.saved.append((g, k, v))
                    g[k] = replacements[orig_cp if v is orig_cp else orig_seq]
        return self

    def __exit__(self, *exc):
        for target, key, value in reversed(self.saved):
            if isinstance(target, dict):
                target[key] = value
            else:
                setattr(target, key, value)


def _join(prefix, name):
    return prefix + "." + name if prefix and name else prefix or name


def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


_INTEGER = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)


def _type(shape, dtype=torch.float32):
    """f32[...], or i32[...] for an integer tensor (ids, targets)."""
    return "%s[%s]" % ("i32" if dtype in _INTEGER else "f32", ",".join(str(d) for d in shape))


class _BuffersKept:
    """Restores every buffer of `root` on exit: running the model to find its
    shapes (ShapeProp) must not change it (batch norm's running statistics
    are updated by every forward pass in training mode)."""

    def __init__(self, root):
        self.root = root

    def __enter__(self):
        self.saved = [(b, b.detach().clone()) for b in self.root.buffers()]
        return self

    def __exit__(self, *exc):
        with torch.no_grad():
            for b, v in self.saved:
                b.copy_(v)


def _ident(name):
    return "".join(c if c.isalnum() or c in "_." else "_" for c in name)


class _Const:
    """A Python value the traced code computes from shapes (`B, T = x.shape`,
    x.size(0)): concrete, from the example inputs, never a program value."""

    def __init__(self, value):
        self.value = value


class _Writer:
    def __init__(self):
        self.count = 0

    def fresh(self):
        self.count += 1
        return "v%d" % self.count


def _tensor_names(root):
    """id(tensor) -> its full path in `root`, for every parameter and buffer.

    A tensor reachable by two paths (a tied weight) has one name, the first
    that named_parameters() or named_buffers() gives, so that it is one
    input of the program and its gradient is the sum over its uses."""
    names = {}
    for n, t in list(root.named_parameters()) + list(root.named_buffers()):
        names.setdefault(id(t), n)
    return names


class _Params:
    """The tensors a program body reads from the model (parameters, buffers,
    tensor attributes), keyed by the tensor's identity and whether it is read
    transposed; each is one input of the body, named by its full path."""

    def __init__(self):
        self.by_key = {}  # (id(tensor), transposed) -> (ident, path, source tensor, transposed)

    def get(self, path, tensor, transposed):
        key = (id(tensor), transposed)
        if key not in self.by_key:
            name = path + (".T" if transposed else "")
            self.by_key[key] = (_ident(name), name, tensor, transposed)
        return self.by_key[key][0]

    def items(self):
        return list(self.by_key.values())


def _resolve(traced, target, where):
    """The module that owns attribute path `target` of the traced module
    `traced` (walking the original modules, not the GraphModule's copies,
    whose intermediate modules are fresh nn.Module()s with no path), and the
    tensor itself."""
    owner = traced
    *owners, field = target.split(".")
    for part in owners:
        owner = getattr(owner, part, None)
        if owner is None:
            raise ExportError("%s: get_attr %r: no submodule %r on the traced module" % (where, target, part))
    return owner, getattr(owner, field)


def _convert(gm, traced, root, prefix, arg_ids, writer, lines, indent, params):
    """Converts the fx GraphModule `gm`, traced from the module `traced` (at
    path `prefix` of `root`; a region checkpoint_sequential made has no path
    of its own and is named by its first module's).

    arg_ids: the program ids of gm's placeholders, in order. params: a
    _Params, the tensors this body reads from the model, which its enclosing
    program passes in (added on first use). Every tensor is named by its full
    path in `root` (a buffer `shift` of block `a.b` is "a.b.shift", never
    "shift"), found from the original modules: a path that cannot be found is
    an ExportError, never a guess. Appends statements to `lines`; returns the
    id of the output.
    """
    env = {}
    placeholders = iter(arg_ids)
    paths = {id(m): n for n, m in root.named_modules()}
    names = _tensor_names(root)
    mods = dict(gm.named_modules())

    def tensor_path(tensor, owner, attr, node):
        path = names.get(id(tensor))
        if path is not None:
            return path
        owner_path = paths.get(id(owner))
        if owner_path is None:
            fail(node, "a tensor attribute %r of a module that is not a submodule of the exported model" % attr)
        return _join(owner_path, attr)

    def where(node):
        if node.op == "call_module":
            path = paths.get(id(mods[node.target]), _join(prefix, node.target))
        else:
            path = "%s (%s)" % (prefix, node.name) if prefix else node.name
        return path or "<root>"

    def param(module, attr, node, transposed=False):
        tensor = getattr(module, attr)
        return params.get(tensor_path(tensor, module, attr, node), tensor, transposed)

    def shape(node):
        meta = node.meta.get("tensor_meta")
        return tuple(meta.shape) if meta is not None else None

    def dtype(node):
        meta = node.meta.get("tensor_meta")
        return meta.dtype if meta is not None else torch.float32

    def emit(op, inputs, node, attrs="", typed=True):
        if any(not isinstance(i, str) for i in inputs):
            fail(node, "%s of a Python value computed from shapes (a tensor is expected)" % op)
        out = writer.fresh()
        s = shape(node) if node is not None and typed else None
        t = ": %s" % _type(s) if s is not None else ""
        site = " @ %s" % _quote(where(node)) if node is not None else ""
        lines.append("%s%%%s%s = %s(%s)%s%s" % (indent, out, t, op, ", ".join("%" + i for i in inputs), attrs, site))
        return out

    def fail(node, what):
        raise _Unsupported("%s: %s%s" % (where(node), what, _UNSUPPORTED))

    def tensor_arg(node, a):
        if not isinstance(a, torch.fx.Node):
            fail(node, "%s with a non-tensor argument %r" % (node.target, a))
        return env[a]

    def concrete(a):
        """a, or the Python value of a node the traced code computed from shapes."""
        if isinstance(a, torch.fx.Node) and isinstance(env.get(a), _Const):
            return env[a].value
        return a

    def binary(node, a, b, name):
        a, b = concrete(a), concrete(b)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            ops = {"add": operator.add, "mul": operator.mul, "sub": operator.sub, "div": operator.truediv}
            return _Const(ops[name](a, b))
        if isinstance(b, (int, float)) and name in ("mul", "div"):
            c = float(b) if name == "mul" else 1.0 / float(b)
            return emit("scale", [tensor_arg(node, a)], node, " scalar=%r" % c)
        if isinstance(a, (int, float)) and name == "mul":
            return emit("scale", [tensor_arg(node, b)], node, " scalar=%r" % float(a))
        if name in ("add", "mul", "sub") and isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node):
            sa, sb = shape(a), shape(b)
            if sa == sb:
                if name == "mul" and a is b:
                    return emit("square", [env[a]], node)
                return emit(name, [env[a], env[b]], node)
            if name == "add" and sb is not None and len(sb) == 1 and sa and sa[-1] == sb[0]:
                return emit("bias_add", [env[a], env[b]], node)
            if name == "add" and sa is not None and len(sa) == 1 and sb and sb[-1] == sa[0]:
                return emit("bias_add", [env[b], env[a]], node)
            fail(node, "%s of shapes %s and %s (broadcasting)" % (name, sa, sb))
        fail(node, "%s(%r, %r)" % (name, a, b))

    def reduce_all(node, x, kind, rest):
        if rest:
            fail(node, "%s over some axes (%r): only a sum of every element" % (kind, rest))
        s = emit("sum", [env[x]], node)
        if kind == "mean":
            n = int(np.prod(shape(x)))
            s = emit("scale", [s], node, " scalar=%r" % (1.0 / n))
        return s

    def unary(node, fn, args, kwargs):
        x = args[0]
        if fn in (torch.relu, F.relu):
            return emit("relu", [env[x]], node)
        if fn is torch.sin:
            return emit("sin", [env[x]], node)
        if fn is torch.cos:
            return emit("cos", [env[x]], node)
        if fn is torch.square:
            return emit("square", [env[x]], node)
        if fn is F.gelu:
            return emit("gelu" if kwargs.get("approximate", "none") == "tanh" else "gelu_erf", [env[x]], node)
        if fn is F.dropout:
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            training = args[2] if len(args) > 2 else kwargs.get("training", True)
            return dropout(node, p, training, x)
        if fn in (F.log_softmax, torch.log_softmax):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim not in (-1, len(shape(x)) - 1):
                fail(node, "log_softmax over dim %r (remat's is over the last axis)" % dim)
            return emit("log_softmax", [env[x]], node)
        if fn in (torch.softmax, F.softmax):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim not in (-1, len(shape(x)) - 1):
                fail(node, "softmax over dim %r (remat's is over the last axis)" % dim)
            return emit("softmax", [env[x]], node)
        return None

    def pair(value, what, node):
        """A square attribute (k or (k, k)) as one int."""
        v = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
        if len(v) != 2 or v[0] != v[1]:
            fail(node, "%s %r (remat's is square)" % (what, value))
        return int(v[0])

    def conv2d(node, m, x):
        if m.bias is not None or m.groups != 1 or pair(m.dilation, "dilation", node) != 1 \
                or m.padding_mode != "zeros" or isinstance(m.padding, str):
            fail(node, "nn.Conv2d(bias=%s, groups=%d, dilation=%r, padding=%r, padding_mode=%r) (remat's "
                 "conv2d: no bias, groups 1, dilation 1, zero padding given as a number)"
                 % (m.bias is not None, m.groups, m.dilation, m.padding, m.padding_mode))
        stride, pad = pair(m.stride, "stride", node), pair(m.padding, "padding", node)
        return emit("conv2d", [env[x], param(m, "weight", node)], node, " ints=[%d,%d]" % (stride, pad))

    def batch_norm(node, m, x):
        """nn.BatchNorm2d in training mode: the batch's statistics, and the new
        running ones as the state of its running_mean and running_var
        (engines/api/CONTRACT.md, state). num_batches_tracked, an integer
        counter that changes nothing when momentum is set, is not exported."""
        if not m.training:
            fail(node, "nn.BatchNorm2d in eval mode (remat's batch_norm normalizes with the batch's "
                 "statistics: export the model in train())")
        if not m.affine or not m.track_running_stats or m.momentum is None:
            fail(node, "nn.BatchNorm2d(affine=%s, track_running_stats=%s, momentum=%r) (remat's: affine, "
                 "running statistics, a momentum)" % (m.affine, m.track_running_stats, m.momentum))
        for stat, op in (("running_mean", "batch_norm_running_mean"), ("running_var", "batch_norm_running_var")):
            new = emit(op, [env[x], param(m, stat, node)], node, " scalar=%r" % float(m.momentum), typed=False)
            # The state op names the program's input: its id at the top level.
            name = _ident(tensor_path(getattr(m, stat), m, stat, node))
            emit("state", [new], node, " name=%s" % _quote(name), typed=False)
        return emit("batch_norm", [env[x], param(m, "weight", node), param(m, "bias", node)], node,
                    " scalar=%r" % float(m.eps))

    def max_pool2d(node, m, x):
        if pair(m.dilation, "dilation", node) != 1 or m.ceil_mode or m.return_indices:
            fail(node, "nn.MaxPool2d(dilation=%r, ceil_mode=%s, return_indices=%s) (remat's max_pool2d: "
                 "dilation 1, floor)" % (m.dilation, m.ceil_mode, m.return_indices))
        k = pair(m.kernel_size, "kernel_size", node)
        stride = pair(m.stride if m.stride is not None else m.kernel_size, "stride", node)
        return emit("max_pool2d", [env[x]], node, " ints=[%d,%d,%d]" % (k, stride, pair(m.padding, "padding", node)))

    def dropout(node, p, training, x):
        """Identity in eval mode or with p = 0; otherwise remat's dropout,
        whose mask is the contract's generator's (engines/api/philox.h) on the
        program's input `dropout_seed` and a key per dropout of the model, in
        export order: not PyTorch's mask (compare with PyTorch at p = 0 or in
        eval mode), the same on every recomputation."""
        if not training or p == 0:
            return env[x]
        if not 0 < p < 1:
            fail(node, "dropout with p=%r (remat's takes p in [0, 1))" % p)
        seed = params.get("dropout_seed", _DROPOUT_SEED[0], False)
        _DROPOUT_KEYS[0] += 1
        return emit("dropout", [env[x], seed], node, " scalar=%r ints=[%d]" % (float(p), _DROPOUT_KEYS[0]))

    def cross_entropy(node, weight, ignore_index, reduction, label_smoothing, logits, targets):
        if weight is not None or reduction != "mean" or label_smoothing:
            fail(node, "cross_entropy(weight=%s, reduction=%r, label_smoothing=%r) (remat's: no weight, "
                 "the mean over rows, no smoothing)" % (weight is not None, reduction, label_smoothing))
        if shape(logits) is None or len(shape(logits)) != 2:
            fail(node, "cross_entropy of logits %s (remat's takes (N, C))" % (shape(logits),))
        return emit("cross_entropy", [env[logits], env[targets]], node)

    for node in gm.graph.nodes:
        try:
            if node.op == "placeholder":
                env[node] = next(placeholders)
            elif node.op == "get_attr":
                owner, tensor = _resolve(traced, node.target, where(node))
                if not isinstance(tensor, torch.Tensor):
                    fail(node, "get_attr %r of type %s (only tensors)" % (node.target, type(tensor).__name__))
                env[node] = param(owner, node.target.rpartition(".")[2], node)
            elif node.op == "output":
                return env[node.args[0]]
            elif node.op == "call_module":
                m = mods[node.target]
                x = node.args[0]
                if isinstance(m, nn.Linear):
                    if shape(x) is None or len(shape(x)) != 2:
                        fail(node, "nn.Linear on a rank-%s input (remat's matmul needs (N, in))" % (len(shape(x)) if shape(x) else "?"))
                    y = emit("matmul", [env[x], param(m, "weight", node, transposed=True)], node)
                    if m.bias is not None:
                        y = emit("bias_add", [y, param(m, "bias", node)], node)
                    env[node] = y
                elif isinstance(m, nn.ReLU):
                    env[node] = emit("relu", [env[x]], node)
                elif isinstance(m, nn.GELU):
                    env[node] = emit("gelu" if m.approximate == "tanh" else "gelu_erf", [env[x]], node)
                elif isinstance(m, nn.LayerNorm):
                    if m.eps != 1e-5 or not m.elementwise_affine or len(m.normalized_shape) != 1:
                        fail(node, "nn.LayerNorm(eps=%g, elementwise_affine=%s, shape %s) (remat's: eps 1e-5, affine, last axis)"
                             % (m.eps, m.elementwise_affine, tuple(m.normalized_shape)))
                    env[node] = emit("layer_norm", [env[x], param(m, "weight", node), param(m, "bias", node)], node)
                elif isinstance(m, nn.Softmax):
                    if m.dim not in (-1, len(shape(x)) - 1):
                        fail(node, "nn.Softmax(dim=%r) (remat's softmax is over the last axis)" % m.dim)
                    env[node] = emit("softmax", [env[x]], node)
                elif isinstance(m, nn.Identity):
                    env[node] = env[x]
                elif isinstance(m, nn.Embedding):
                    if m.padding_idx is not None or m.max_norm is not None or m.scale_grad_by_freq or m.sparse:
                        fail(node, "nn.Embedding(padding_idx=%r, max_norm=%r, scale_grad_by_freq=%s, sparse=%s) "
                             "(remat's embedding: a plain table)" % (m.padding_idx, m.max_norm,
                                                                     m.scale_grad_by_freq, m.sparse))
                    if dtype(x) not in _INTEGER:
                        fail(node, "nn.Embedding of a %s input (ids are integers)" % dtype(x))
                    env[node] = emit("embedding", [param(m, "weight", node), env[x]], node)
                elif isinstance(m, nn.Dropout):
                    env[node] = dropout(node, m.p, m.training, x)
                elif isinstance(m, nn.Conv2d):
                    env[node] = conv2d(node, m, x)
                elif isinstance(m, nn.BatchNorm2d):
                    env[node] = batch_norm(node, m, x)
                elif isinstance(m, nn.MaxPool2d):
                    env[node] = max_pool2d(node, m, x)
                elif isinstance(m, nn.AdaptiveAvgPool2d):
                    size = m.output_size if isinstance(m.output_size, tuple) else (m.output_size,) * 2
                    if tuple(size) != (1, 1):
                        fail(node, "nn.AdaptiveAvgPool2d(%r) (remat's global_avg_pool: output size 1)" % (m.output_size,))
                    env[node] = emit("reshape", [emit("global_avg_pool", [env[x]], node, typed=False)], node,
                                     " ints=[%s]" % ",".join(str(d) for d in shape(node)))
                elif isinstance(m, nn.CrossEntropyLoss):
                    env[node] = cross_entropy(node, m.weight, m.ignore_index, m.reduction,
                                              m.label_smoothing, node.args[0], node.args[1])
                else:
                    fail(node, "nn.%s" % type(m).__name__)
            elif node.op == "call_function" and node.target is _checkpoint_marker:
                region = _REGIONS[node.args[0]]
                inner_args = list(node.args[1:])
                path = paths.get(id(region))
                # A region checkpoint_sequential made is a new nn.Sequential of
                # the root's modules: named by its first module's path.
                sub_prefix = path if path is not None else paths.get(id(next(region.children(), None)), prefix)
                with _Patched(region):
                    graph = _trace(region, sub_prefix)
                sub = torch.fx.GraphModule(region, graph)
                with _BuffersKept(root):
                    ShapeProp(sub).propagate(*[torch.zeros(shape(a), dtype=dtype(a)) for a in inner_args])
                body_lines, body_params = [], _Params()
                body_ids = ["a%d" % i for i in range(len(inner_args))]
                out = _convert(sub, region, root, sub_prefix, body_ids, writer,
                               body_lines, indent + "  ", body_params)
                outer_inputs = [env[a] for a in inner_args]
                param_decls = ["%s: %s" % (i, _type(shape(a), dtype(a))) for i, a in zip(body_ids, inner_args)]
                for bid, path, t, transposed in body_params.items():
                    outer_inputs.append(params.get(path[:-2] if transposed else path, t, transposed))
                    param_decls.append("%s: %s" % (bid, _type(t.t().shape if transposed else t.shape, t.dtype)))
                y = writer.fresh()
                lines.append("%s%%%s: %s = checkpoint(%s) name=%s policy=\"nothing_saveable\" {"
                             % (indent, y, _type(shape(node)), ", ".join("%" + i for i in outer_inputs),
                                _quote(sub_prefix or "region")))
                lines.append("%s  body(%s)" % (indent, ", ".join(param_decls)))
                lines.extend(body_lines)
                lines.append("%s  return %%%s" % (indent, out))
                lines.append("%s}" % indent)
                env[node] = y
            elif node.op in ("call_function", "call_method"):
                t, args, kwargs = node.target, node.args, node.kwargs
                names = {operator.add: "add", operator.iadd: "add", torch.add: "add", "add": "add",
                         "add_": "add", operator.mul: "mul", torch.mul: "mul",
                         "mul": "mul", operator.truediv: "div", torch.div: "div", "div": "div",
                         operator.sub: "sub", torch.sub: "sub", "sub": "sub"}
                if t is getattr and args[1] == "shape":
                    env[node] = _Const(tuple(shape(args[0])))
                elif t == "size":
                    dims = tuple(shape(args[0]))
                    dim = concrete(args[1]) if len(args) > 1 else kwargs.get("dim")
                    env[node] = _Const(dims if dim is None else dims[dim])
                elif t is operator.getitem and isinstance(env.get(args[0]), _Const):
                    env[node] = _Const(env[args[0]].value[concrete(args[1])])
                elif t in names:
                    env[node] = binary(node, args[0], args[1], names[t])
                elif t in (operator.matmul, torch.matmul, torch.mm, torch.bmm, "matmul"):
                    env[node] = emit("matmul", [env[args[0]], env[args[1]]], node)
                elif t in (operator.pow, torch.pow, "pow") and args[1] == 2:
                    env[node] = emit("square", [env[args[0]]], node)
                elif t in ("relu", "sin", "cos", "square", "neg", "exp", "log"):
                    env[node] = emit(t, [env[args[0]]], node)
                elif t in (operator.neg, torch.neg, torch.exp, torch.log):
                    env[node] = emit({operator.neg: "neg", torch.neg: "neg", torch.exp: "exp",
                                      torch.log: "log"}[t], [env[args[0]]], node)
                elif t in ("sum", torch.sum, "mean", torch.mean):
                    kind = "mean" if t in ("mean", torch.mean) else "sum"
                    env[node] = reduce_all(node, args[0], kind, list(args[1:]) + list(kwargs.items()))
                elif t in ("transpose", torch.transpose):
                    dims = sorted(d % len(shape(args[0])) for d in args[1:3])
                    if dims != [len(shape(args[0])) - 2, len(shape(args[0])) - 1]:
                        fail(node, "transpose%r (remat's swaps the last two axes)" % (tuple(args[1:]),))
                    env[node] = emit("transpose", [env[args[0]]], node)
                elif t in ("t", torch.t) or (node.op == "call_function" and t is getattr and args[1] == "mT"):
                    env[node] = emit("transpose", [env[args[0]]], node)
                elif t == "softmax":
                    dim = args[1] if len(args) > 1 else kwargs.get("dim")
                    if dim not in (-1, len(shape(args[0])) - 1):
                        fail(node, "softmax over dim %r (remat's is over the last axis)" % dim)
                    env[node] = emit("softmax", [env[args[0]]], node)
                elif t is F.layer_norm:
                    fail(node, "F.layer_norm (use nn.LayerNorm)")
                elif t in (torch.flatten, "flatten", "view", "reshape", torch.reshape):
                    # The output's shape, as ShapeProp found it (x.view(x.size(0), -1) included).
                    env[node] = emit("reshape", [env[args[0]]], node,
                                     " ints=[%s]" % ",".join(str(d) for d in shape(node)))
                elif t is F.cross_entropy:
                    kw = dict(kwargs)
                    env[node] = cross_entropy(node, kw.get("weight"), kw.get("ignore_index", -100),
                                              kw.get("reduction", "mean"), kw.get("label_smoothing", 0.0),
                                              args[0], args[1] if len(args) > 1 else kw.get("target"))
                else:
                    y = unary(node, t, args, kwargs) if callable(t) else None
                    if y is None:
                        fail(node, "%s %s" % (node.op, getattr(t, "__name__", t)))
                    env[node] = y
            else:
                fail(node, node.op)
        except _Unsupported as e:
            # Recorded, and the conversion goes on, so that one run names
            # everything the model uses that remat cannot take.
            _ERRORS.append(str(e))
            env[node] = writer.fresh()
    raise ExportError("%s: the traced graph has no output" % (prefix or "<root>"))


def export(module, example_inputs, out_dir, loss=None, name=None):
    """Writes out_dir/program.txt and out_dir/<input>.npy; returns the program's text."""
    _REGIONS.clear()
    del _ERRORS[:]
    _DROPOUT_KEYS[0] = 0
    with _Patched(module):
        graph = _trace(module, "")
    gm = torch.fx.GraphModule(module, graph)
    with _BuffersKept(module):
        ShapeProp(gm).propagate(*example_inputs)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ExportError("forward takes %d inputs, %d examples given" % (len(placeholders), len(example_inputs)))
    input_ids = [_ident(n.target) for n in placeholders]
    writer, lines, params = _Writer(), [], _Params()
    out = _convert(gm, module, module, "", input_ids, writer, lines, "  ", params)
    if len(_ERRORS) == 1:
        raise ExportError(_ERRORS[0])
    if _ERRORS:
        raise ExportError("%d uses in the model are not supported by remat's op set "
                          "(tools/torch_export.py lists what is):\n%s"
                          % (len(_ERRORS), "\n".join("  " + e.replace(_UNSUPPORTED, "") for e in _ERRORS)))
    out_node = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out_shape = tuple(out_node.meta["tensor_meta"].shape)
    if loss == "sum_of_squares":
        sq = writer.fresh()
        lines.append("  %%%s: %s = square(%%%s)" % (sq, _type(out_shape), out))
        out = sq
    if loss in ("sum", "sum_of_squares"):
        prev = out
        out = writer.fresh()
        lines.append("  %%%s: f32[] = sum(%%%s)" % (out, prev))
    elif loss is not None:
        raise ExportError("loss=%r: expected None, 'sum' or 'sum_of_squares'" % loss)
    elif out_shape != ():
        raise ExportError("the module returns %s, not a scalar: pass loss='sum' or 'sum_of_squares'" % (out_shape,))
    exported = [(pid, (t.detach().t() if tr else t.detach())) for pid, _, t, tr in params.items()]
    # Two tensors under one name would be one input of the program: refuse
    # rather than merge them (a parameter path equal to an argument's name,
    # or two paths that differ only in characters _ident replaces).
    owners = {}
    for (pid, path, _, _), kind in [(p, "parameter or buffer") for p in params.items()] + \
            [((i, n.target, None, False), "argument of forward") for i, n in zip(input_ids, placeholders)]:
        if pid in owners:
            raise ExportError("two inputs of the program would both be named %r: %s %r and %s %r; rename one"
                              % (pid, owners[pid][0], owners[pid][1], kind, path))
        owners[pid] = (kind, path)
    decls = ["%s: %s" % (pid, _type(t.shape, t.dtype)) for pid, t in exported]
    decls += ["%s: %s" % (i, _type(x.shape, x.dtype)) for i, x in zip(input_ids, example_inputs)]
    text = "# exported from PyTorch %s by tools/torch_export.py\n" % torch.__version__
    text += "program %s(%s) {\n" % (_ident(name or type(module).__name__), ", ".join(decls))
    text += "\n".join(lines) + "\n  return %%%s\n}\n" % out
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "program.txt"), "w") as f:
        f.write(text)
    for pid, t in exported:
        kind = np.int32 if t.dtype in _INTEGER else np.float32
        np.save(os.path.join(out_dir, pid + ".npy"), t.contiguous().numpy().astype(kind))
    for i, x in zip(input_ids, example_inputs):
        kind = np.int32 if x.dtype in _INTEGER else np.float32
        np.save(os.path.join(out_dir, i + ".npy"), x.detach().numpy().astype(kind))
    return text
