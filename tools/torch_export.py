#!/usr/bin/env python3
"""Exports a PyTorch nn.Module as a remat program file (engines/api/program_text.h).

    from torch_export import export
    export(model, (x,), "out/")          # out/program.txt, out/<input>.npy
    export(gpt, (idx, targets), "gpt/")  # nanoGPT: forward returns (logits, loss)
    export(resnet, (images,), "rn/", loss=F.cross_entropy, loss_inputs=(labels,))
    export(llama, {"input_ids": ids, "labels": ids}, "llama/")   # keyword inputs

`export(module, example_inputs, out_dir, loss=None, name=None, output=None,
loss_inputs=())` runs the model eagerly on the example inputs (a tuple, or a
dict of forward's keyword arguments) and records the ATen ops it reduces to
(torch_export_trace.py: a TorchDispatchMode, with the module path each op
ran in); torch.utils.checkpoint's calls become checkpoint regions however
they were reached (torch_export_regions.py); each ATen op maps to remat's ops
by one table (torch_export_ops.py, which lists them); torch_export_lower.py
walks the trace and torch_export_program.py writes out_dir/program.txt and
one .npy per input of the program:

- every parameter and buffer the program reads, named by its full path in
  `module` (a tied weight: one input, under its first path); a parameter
  read only through .t() (nn.Linear's weight) written transposed as
  "<path>.T", so that remat's gradient of it is PyTorch's, transposed;
- what the model computes without any float parameter or float input (masks,
  position ids, Hugging Face's shifted labels, arange; integer views of the
  inputs) is computed at export and becomes an input, named by the module
  path that made it and the op (equal constants: one input), or by the
  example input whose elements it holds (targets.view(-1) is "targets");
- the example inputs the program reads, named by forward's arguments, and
  the dropout seed (dropout_seed, i32[]) when the model has dropout in
  training mode.

The program's value is the loss: the module's output when it is a float
scalar; with a tuple, its one float scalar or element `output`; with a
Hugging Face ModelOutput or a dict, its "loss"; with loss="sum" or
"sum_of_squares" that reduction of the output; with loss a function
(F.cross_entropy), loss(output, *loss_inputs), its inputs named targets (one)
or target0, target1, ... Anything remat cannot take is one ExportError
naming every unsupported op that reaches the loss (module path, ATen op,
what is not supported), one a line; a checkpoint call that does not become a
region is an ExportError too.
"""

import inspect

import torch

from torch_export_errors import ExportError, _message
from torch_export_lower import Lowering
from torch_export_ops import TABLE
from torch_export_program import Inputs, write_program
from torch_export_regions import Regions
from torch_export_trace import run_traced

__all__ = ["ExportError", "export"]


def _is_loss(t):
    return isinstance(t, torch.Tensor) and t.dim() == 0 and t.is_floating_point()


def _pick_output(out, output):
    """The program's value among what the module returned."""
    if isinstance(out, torch.Tensor):
        if output is not None:
            raise ExportError("output=%r: the module returns one value, not a tuple" % (output,))
        return out
    if isinstance(out, dict) or hasattr(out, "keys"):  # a dict or a Hugging Face ModelOutput
        key = output if output is not None else "loss"
        value = out.get(key) if hasattr(out, "get") else None
        if value is None:
            raise ExportError("the module returns %s with keys %s and no %r: pass labels (Hugging Face) or "
                              "output=KEY" % (type(out).__name__, list(out.keys()), key))
        return value
    if isinstance(out, (tuple, list)):
        kinds = ["%s %s" % (type(v).__name__, tuple(v.shape) if isinstance(v, torch.Tensor) else "") for v in out]
        if output is None:
            scalars = [i for i, v in enumerate(out) if _is_loss(v)]
            if len(scalars) != 1:
                raise ExportError("the module returns %d values (%s), %d of them float scalars: pass output=INDEX, "
                                  "the one to differentiate" % (len(out), ", ".join(kinds), len(scalars)))
            output = scalars[0]
        if not isinstance(output, int) or not -len(out) <= output < len(out) \
                or not isinstance(out[output], torch.Tensor):
            raise ExportError("output=%r: the module returns %d values (%s)" % (output, len(out), ", ".join(kinds)))
        return out[output]
    raise ExportError("the module returns a %s, not a tensor" % type(out).__name__)


def _named_inputs(module, example_inputs):
    """(args, kwargs, [(name, tensor)]) of the example inputs."""
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs), list(example_inputs.items())
    example_inputs = tuple(example_inputs)
    params = [p for p in inspect.signature(module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) < len(example_inputs) and not any(
            p.kind == p.VAR_POSITIONAL for p in inspect.signature(module.forward).parameters.values()):
        raise ExportError("forward takes %d inputs, %d examples given" % (len(params), len(example_inputs)))
    names = [p.name for p in params] + ["input%d" % i for i in range(len(params), len(example_inputs))]
    return example_inputs, {}, list(zip(names, example_inputs))


def export(module, example_inputs, out_dir, loss=None, name=None, output=None, loss_inputs=(),
           fixed_decisions=False, weights=None):
    """Writes out_dir/program.txt and out_dir/<input>.npy; returns the program's text.

    loss: None (the module's output is the loss), "sum", "sum_of_squares", or
    a function of the output and `loss_inputs` (the targets, say: export(m,
    (x,), d, loss=F.cross_entropy, loss_inputs=(targets,))), traced with the
    model; its inputs are named targets (one) or target0, target1, ...
    output: which element of a returned tuple is the loss (nanoGPT's
    (logits, loss): by default the one float scalar).
    fixed_decisions: integer and boolean results computed from the model's
    values (a mixture of experts' topk routing, sort's permutation, argmax,
    a comparison's mask) become constants, this example's, so that the
    program is this training step: the tokens each expert gets as in this
    run, the gradient through the values kept (topk's and sort's values,
    max(x, dim)'s, are gathers at the fixed indices, PyTorch's own
    gradient). The program then holds for these inputs and parameters
    only. Without it such a result is an error naming it.
    weights: with the module on the meta device (a shapes-only export), a
    dict of real tensors by name (the same model's state_dict() built on the
    CPU, and any example input given on the meta device, by its argument
    name): the input files are written from it, so that a model whose real
    export would not fit (the trace keeps every tensor the forward makes)
    exports at the cost of its weights. The program is the shapes-only
    one; what its header lists as assumed was not checked on these
    values."""
    args, kwargs, named = _named_inputs(module, example_inputs)
    loss_inputs = tuple(loss_inputs)
    if loss_inputs and not callable(loss):
        raise ExportError("loss_inputs given without a loss function")
    loss_names = ["targets"] if len(loss_inputs) == 1 else ["target%d" % i for i in range(len(loss_inputs))]
    named = named + list(zip(loss_names, loss_inputs))
    if loss is not None and not callable(loss) and loss not in ("sum", "sum_of_squares"):
        raise ExportError("loss=%r: expected None, 'sum', 'sum_of_squares' or a function" % (loss,))

    def forward():
        out = module(*args, **kwargs)
        if callable(loss):
            return loss(out, *loss_inputs)
        out = _pick_output(out, output)
        if loss == "sum_of_squares":
            return torch.square(out).sum()
        if loss == "sum":
            return out.sum()
        if not _is_loss(out):
            raise ExportError("the module returns a %s of shape %s, not a scalar: pass loss='sum' or "
                              "'sum_of_squares'" % (type(out).__name__, tuple(getattr(out, "shape", ()))))
        return out

    regions = Regions()
    trace, result = run_traced(module, named, forward, regions, frozenset(TABLE), fixed_decisions)
    try:
        return _write(module, name, out_dir, named, trace, result, regions, weights)
    except ExportError:
        raise
    except Exception as e:  # the exporter's own fault: named, never raw
        raise ExportError("the exporter failed after tracing %s (%s: %s)" % (type(module).__name__,
                                                                         type(e).__name__, e)) from e


def _write(module, name, out_dir, named, trace, result, regions, weights=None):
    """The program of the trace, checked and written (export's second half)."""
    if not _is_loss(result):
        raise ExportError("the loss is %s, not a float scalar" % type(result).__name__)
    integer_inputs = [(n, t) for n, t in named if isinstance(t, torch.Tensor) and not t.is_floating_point()]
    inputs = Inputs()
    lowering = Lowering(trace, inputs, integer_inputs, TABLE)
    lines = lowering.hard + (lowering.run(trace.value(result)) or [])
    if lines:
        hint = ""
        if trace.decisions and not trace.fixed_decisions:
            path, op = trace.decisions[0]
            hint = ("\n%d integer or boolean results were computed from the model's values, the first at %s "
                    "(aten.%s): export(..., fixed_decisions=True) takes this run's as constants (a mixture of "
                    "experts' routing)" % (len(trace.decisions), path or "<root>", op))
        raise ExportError(_message(lines) + hint)
    lost = []
    lowering.top.prune([lowering.top.out], lost, lowering.fresh)
    _check_regions(regions, lowering.top, lost)
    if weights is not None and not trace.shapes_only:
        raise ExportError("weights= is for a model on the meta device; this one's weights are real")
    return write_program(out_dir, name or type(module).__name__, lowering.top, inputs,
                         trace.assumed if trace.shapes_only else None, weights)


def _kept(body):
    for s in body.stmts:
        if s.op == "checkpoint":
            yield s.body.begin.index
            yield from _kept(s.body)


def _check_regions(regions, top, lost):
    """Every checkpoint call the model made is a region of the program, or an
    ExportError naming each one that is not."""
    kept = set(_kept(top))
    reasons = {begin.index: why for begin, why in lost}
    missing = []
    for call in regions.calls:
        index = call["region"]
        if index is None:
            missing.append("checkpoint call at %s: no region was recorded (it reached neither "
                           "_checkpoint_without_reentrant_generator nor CheckpointFunction)" % call["site"])
        elif index not in kept:
            begin = regions.begins[index]
            missing.append("checkpoint region %s (called at %s): %s" % (begin.name, call["site"],
                                                                       reasons.get(index, "not in the program")))
    if missing:
        raise ExportError("the model made %d checkpoint calls; %d are regions of the program, %d are not:\n%s"
                          % (len(regions.calls), len(regions.calls) - len(missing), len(missing),
                             "\n".join("  " + m for m in missing)))
