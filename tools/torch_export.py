#!/usr/bin/env python3
"""Exports a PyTorch nn.Module as a remat program file (engines/api/program_text.h).

    from torch_export import export
    export(model, (x,), "out/")          # out/program.txt, out/<input>.npy
    export(gpt, (idx, targets), "gpt/")  # nanoGPT: forward returns (logits, loss)
    export(resnet, (images,), "rn/", loss=F.cross_entropy, loss_inputs=(labels,))

`export(module, example_inputs, out_dir, loss=None, name=None, output=None,
loss_inputs=())` traces `module` with torch.fx, running every node on the
example inputs as it goes (so Python on shapes is concrete: `B, T, C =
x.size()`, `assert t <= block_size`, `torch.arange(T)`), and writes
out_dir/program.txt and one .npy per input of the program: every parameter
and buffer the forward reads, named by its full path in `module`
("layers.0.fc1.weight", "block.shift": never its last name alone, so tensors
of the same name in different modules stay apart), the constants it folds,
and every example input (named by forward's argument). A tensor reachable by
two paths (a tied weight) is one input, under the first path
named_parameters() gives. Two inputs that would get one name are an
ExportError, never merged.
The program's value is the module's output, which must be a float scalar:
with a tuple (nanoGPT's (logits, loss)), its one float scalar or element
`output`; with loss="sum" or "sum_of_squares" that reduction is appended;
with loss a function (F.cross_entropy), loss(output, *loss_inputs), its
inputs named targets (one) or target0, target1, ...

Folded: whatever the forward computes from buffers, constants and shapes
alone (a registered causal mask sliced to T and compared with 0,
torch.arange(T), torch.ones(...).tril()) is computed at export and becomes an
input of the program, named by the buffer's path or the module that reads it
(equal constants are one input: every layer's causal mask). Integer inputs of
forward used only through one view (targets.view(-1)) are declared in that
shape.

Mapped (all float32, remat's ops; program.h):
  nn.Linear(x: (..., in))      matmul(x, W^T) [+ bias_add], leading axes merged by
                               reshapes; the parameter is written transposed, as
                               "<path>.weight.T" (in, out), so that remat's gradient of
                               it is PyTorch's, transposed; a weight tied to another use
                               (nanoGPT's lm_head and wte) is written as it is and
                               transposed by an op
  nn.ReLU, relu                relu          nn.GELU(approximate='tanh')  gelu
  nn.GELU(), F.gelu (erf)       gelu_erf      F.log_softmax(dim=-1)   log_softmax
  nn.Embedding (plain)          embedding on integer ids
  nn.Dropout, F.dropout         dropout on the program's input dropout_seed (i32[]), a key
                               per dropout in export order: the contract's mask, not
                               PyTorch's; the identity in eval mode or with p = 0
  nn.LayerNorm(eps=1e-5, affine), F.layer_norm(x, (C,), w, b, 1e-5)  layer_norm
                               (b None: a zero bias input)
  nn.Softmax(dim=-1), softmax(dim=-1)  softmax
  torch.sin, torch.cos          sin, cos     x * x, x ** 2, torch.square  square
  matmul, @                     matmul: rank 2, batched rank 3, rank 4 with equal batch
                               axes (reshaped to rank 3), (..., k) @ (k, n)
  .transpose(a, b), .permute, .t(), .mT  transpose (last two axes, rank <= 3) or permute
  .split(n, dim), .chunk(k, dim), x[a:b, ...] (step 1)   slice
  .contiguous()                 (nothing)
  +  (same shapes)              add          +  (b's shape a suffix of a's: (T, C) on
                               (B, T, C), a bias vector)  bias_add on rows (reshapes)
  -  (same shapes), torch.sub   sub          unary -, torch.neg      neg
  torch.exp                     exp          torch.log               log
  *  (same shapes)              mul          * or / by a Python number  scale
  .masked_fill(mask, v)         masked_fill, the mask folded (from buffers and shapes)
  F.scaled_dot_product_attention(q, k, v, attn_mask=folded bool or None, dropout_p,
                               is_causal, scale)  its definition: permute, matmul, scale,
                               masked_fill(-inf) with a causal mask input, softmax,
                               dropout, matmul
  .sum(), torch.sum (all axes)  sum          .mean() (all axes)  sum, then scale 1/n
  nn.Conv2d(bias=False, square stride/padding, groups 1)   conv2d (OIHW weights as they are)
  nn.BatchNorm2d, training mode  batch_norm with the batch's statistics; the new
                               running_mean and running_var (momentum, unbiased
                               variance) as the state of those buffers (state ops:
                               remat returns them, --dump writes state_<path>.npy);
                               num_batches_tracked is not exported
  nn.MaxPool2d(k, s, p)         max_pool2d   nn.AdaptiveAvgPool2d(1)  global_avg_pool
  torch.flatten, .view, .reshape  reshape to the traced shape   nn.Identity  (nothing)
  F.cross_entropy, nn.CrossEntropyLoss (mean, no weight; ignore_index when the
                               example targets hold none: remat's refuses a target
                               outside 0..C-1)  cross_entropy on i32 targets
  out += x                      add
  torch.utils.checkpoint.checkpoint(f, *args, use_reentrant=, preserve_rng_state=,
                               determinism_check=, debug=)   a checkpoint region
                               (nothing_saveable) named by f's module path, or where it
                               was called and f's name (a method, a closure, a lambda)
  torch.utils.checkpoint.checkpoint_sequential(seq, segments, x)
                               consecutive regions, as torch 1.13 runs it: every
                               segment but the last checkpointed, the last inline;
                               remat's --schedule groups the regions into a chain
Anything else (another LayerNorm eps, softmax over another axis, a mask
computed from the inputs, a context_fn, ...) raises ExportError naming the
module path and the op, every such use of the model in one message (one line
each); the exporter never writes a different graph.
"""

import torch
import torch.fx
import torch.nn as nn

from torch_export_body import _SHARED
from torch_export_calls import _DROPOUT_KEYS, _RESHAPED
from torch_export_convert import _convert
from torch_export_errors import _ERRORS, ExportError, _raise_collected
from torch_export_modules import _TIED, _tied_linear_weights
from torch_export_program import _UNWRAP, _WRAPPED, _Params, _Writer, _ident, _type, _write_program
from torch_export_regions import _REGIONS, _ROOT, _Patched
from torch_export_trace import _CONSTANTS, _trace

__all__ = ["ExportError", "export"]


def _pick_output(gm, output):
    """Points the graph's output at the program's value: the module's output,
    or with a tuple or list (nanoGPT's (logits, loss)) its element `output`,
    by default the one float scalar in it."""
    node = next(n for n in gm.graph.nodes if n.op == "output")
    value = node.args[0]
    if not isinstance(value, (tuple, list)):
        if output is not None:
            raise ExportError("output=%r: the module returns one value, not a tuple" % (output,))
        return
    kinds = ["%s %s" % (type(v).__name__, tuple(v.meta["val"].shape) if isinstance(v, torch.fx.Node)
                        and isinstance(v.meta.get("val"), torch.Tensor) else "") for v in value]
    if output is None:
        scalars = [i for i, v in enumerate(value) if isinstance(v, torch.fx.Node)
                   and isinstance(v.meta.get("val"), torch.Tensor) and v.meta["val"].dim() == 0
                   and v.meta["val"].is_floating_point()]
        if len(scalars) != 1:
            raise ExportError("the module returns %d values (%s), %d of them float scalars: pass output=INDEX, "
                              "the one to differentiate" % (len(value), ", ".join(kinds), len(scalars)))
        output = scalars[0]
    if not isinstance(output, int) or not -len(value) <= output < len(value) \
            or not isinstance(value[output], torch.fx.Node):
        raise ExportError("output=%r: the module returns %d values (%s)" % (output, len(value), ", ".join(kinds)))
    node.args = (value[output],)


def _with_loss(module, loss, n_model, loss_names):
    """module with `loss` applied to its output: forward(<module's inputs>,
    <loss_names>) = loss(module(...), ...). Its parameters' paths start with
    _WRAPPED + "."; the export strips that (_unwrapped)."""
    import inspect
    names = [p.name for p in inspect.signature(module.forward).parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:n_model]
    if len(names) != n_model:
        raise ExportError("loss: %s.forward takes %d positional inputs, %d example inputs are for it"
                          % (type(module).__name__, len(names), n_model))
    clash = set(names) & set(loss_names)
    if clash:
        raise ExportError("loss: the loss's inputs %s are also names of forward's inputs" % sorted(clash))
    args = ", ".join(names + list(loss_names))
    scope = {}
    exec("def forward(self, %s):\n    return self._loss(self.%s(%s), %s)\n"
         % (args, _WRAPPED, ", ".join(names), ", ".join(loss_names)), scope)
    wrapper = type("WithLoss", (nn.Module,), {"forward": scope["forward"]})()
    wrapper.add_module(_WRAPPED, module)
    wrapper._loss = loss
    return wrapper


def export(module, example_inputs, out_dir, loss=None, name=None, output=None, loss_inputs=()):
    """Writes out_dir/program.txt and out_dir/<input>.npy; returns the program's text.

    loss: None (the module's output is the loss), "sum", "sum_of_squares", or
    a function of the output and `loss_inputs` (the targets, say: export(m,
    (x,), d, loss=F.cross_entropy, loss_inputs=(targets,))), traced with the
    model; its inputs are named targets (one) or target0, target1, ...
    output: which element of a returned tuple is the loss (nanoGPT's
    (logits, loss): by default the one float scalar)."""
    _UNWRAP[0] = False
    _ROOT[0] = module
    if callable(loss):
        loss_inputs = tuple(loss_inputs)
        loss_names = ["targets"] if len(loss_inputs) == 1 else ["target%d" % i for i in range(len(loss_inputs))]
        label = name or type(module).__name__
        module = _with_loss(module, loss, len(example_inputs), loss_names)
        example_inputs = tuple(example_inputs) + loss_inputs
        name, loss = label, None
        _ROOT[0] = module
        _UNWRAP[0] = True
    elif loss_inputs:
        raise ExportError("loss_inputs given without a loss function")
    try:
        return _export(module, example_inputs, out_dir, loss, name, output)
    finally:
        _UNWRAP[0] = False


def _export(module, example_inputs, out_dir, loss, name, output):
    _REGIONS.clear()
    _CONSTANTS.clear()
    del _ERRORS[:], _SHARED[:]
    _RESHAPED.clear()
    _TIED.clear()
    _TIED.update(_tied_linear_weights(module))
    _DROPOUT_KEYS[0] = 0
    example_inputs = tuple(example_inputs)
    with _Patched(module):
        graph = _trace(module, "", example_inputs)
    gm = torch.fx.GraphModule(module, graph)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ExportError("forward takes %d inputs, %d examples given" % (len(placeholders), len(example_inputs)))
    _pick_output(gm, output)
    input_ids = [_ident(n.target) for n in placeholders]
    writer, lines, params = _Writer(), [], _Params()
    out = _convert(gm, module, module, "", input_ids, writer, lines, "  ", params)
    _raise_collected()
    out_node = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out_shape = tuple(out_node.meta["val"].shape)
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
    return _write_program(out_dir, name or type(module).__name__, lines, out, params, input_ids, placeholders,
                          example_inputs, _RESHAPED)
