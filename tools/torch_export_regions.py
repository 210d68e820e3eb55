"""tools/torch_export.py's checkpoint regions, from PyTorch's own mechanism.

Every torch.utils.checkpoint.checkpoint call ends in one of two places,
however it was reached (imported under any name, inside a function, bound in
functools.partial at module level, kept as a module attribute, through
checkpoint_sequential, Hugging Face's gradient_checkpointing_enable(), timm's
set_grad_checkpointing()): non-reentrant in
_checkpoint_without_reentrant_generator, reentrant in
CheckpointFunction.apply, both looked up in torch.utils.checkpoint's globals
at call time. While the model is traced both are replaced by versions that
mark where the region begins and ends in the trace and run the function
plainly (the exporter needs its forward only).

The calls are also counted apart from that, by a profile hook on
checkpoint's own code object (sys.setprofile): export compares the count
with the regions the program keeps, and a call it could not keep is an
ExportError naming it, never a region lost in silence."""

import contextlib
import functools
import inspect
import os
import sys

import torch
import torch.nn as nn
import torch.utils.checkpoint as tcp

from torch_export_trace import _join


class RegionBegin:
    def __init__(self, index, function, path, site, problem=None):
        self.index, self.function, self.path, self.site, self.problem = index, function, path, site, problem
        self.name = None  # set by Regions.name_of


class RegionEnd:
    def __init__(self, index):
        self.index = index


_TORCH = os.path.dirname(torch.__file__)


def _site(frame):
    """FILE:LINE of the model's code that called checkpoint (torch's own
    wrappers, checkpoint_sequential, functools.partial skipped)."""
    while frame is not None and (frame.f_code.co_filename.startswith(_TORCH)
                                 or frame.f_code.co_filename == functools.__file__):
        frame = frame.f_back
    return "%s:%d" % (frame.f_code.co_filename, frame.f_lineno) if frame is not None else "?"


class Regions:
    """The checkpoint calls of one trace: `calls` (call sites, counted by the
    profile hook) and `begins` (the regions marked, by index)."""

    _CODE = inspect.unwrap(tcp.checkpoint).__code__

    def __init__(self):
        self.calls, self.begins, self.active = [], [], []

    def _profile(self, frame, event, arg):
        if frame.f_code is not self._CODE:
            return
        if event == "call":
            self.calls.append({"site": _site(frame.f_back), "region": None})
            self.active.append((frame, len(self.calls) - 1))
        elif event == "return" and self.active and self.active[-1][0] is frame:
            self.active.pop()

    def _begin(self, trace, function, problem=None):
        index = len(self.begins)
        caller = self.active[-1][1] if self.active else None
        site = self.calls[caller]["site"] if caller is not None else _site(sys._getframe(2))
        if caller is not None:
            self.calls[caller]["region"] = index
        begin = RegionBegin(index, function, trace.stack[-1], site, problem)
        begin.name = self.name_of(function, trace)
        self.begins.append(begin)
        trace.events.append(begin)
        return index

    @contextlib.contextmanager
    def recording(self, trace):
        saved_gen, saved_fn = tcp._checkpoint_without_reentrant_generator, tcp.CheckpointFunction
        regions = self

        # The generator's leading parameters (fn, preserve_rng_state,
        # context_fn, determinism_check, debug, early_stop in PyTorch 2.9)
        # come before the function's own arguments.
        fixed = [p.name for p in inspect.signature(saved_gen).parameters.values()
                 if p.kind == p.POSITIONAL_OR_KEYWORD]

        def generator(fn, *rest, **kwargs):
            # preserve_rng_state, determinism_check, debug and early_stop
            # change how PyTorch recomputes, not what the region computes
            # (remat's recomputation gives the same values, dropout's mask
            # included).
            options = dict(zip(fixed[1:], rest))
            problem = None
            if options.get("context_fn", tcp.noop_context_fn) is not tcp.noop_context_fn:
                problem = "checkpoint with a context_fn (selective checkpointing) is not exported"
            index = regions._begin(trace, fn, problem)
            yield
            trace.events.append(RegionEnd(index))

        class CheckpointFunction:
            @staticmethod
            def apply(function, preserve_rng_state, *args):
                index = regions._begin(trace, function)
                out = function(*args)
                trace.events.append(RegionEnd(index))
                return out

        # A profile function already set (a Python one) is chained; cProfile's
        # (C, not callable) is paused while the model runs, then enabled again.
        previous = sys.getprofile()
        chained = previous if callable(previous) else None

        def profile(frame, event, arg):
            self._profile(frame, event, arg)
            if chained is not None:
                chained(frame, event, arg)

        tcp._checkpoint_without_reentrant_generator, tcp.CheckpointFunction = generator, CheckpointFunction
        sys.setprofile(profile)
        try:
            yield self
        finally:
            if previous is None or chained is not None:
                sys.setprofile(previous)
            else:
                previous.enable()
            tcp._checkpoint_without_reentrant_generator, tcp.CheckpointFunction = saved_gen, saved_fn

    @staticmethod
    def name_of(function, trace):
        """The region's name: the module path of the checkpointed function
        (a module, its forward or __call__, a partial of them), a method's
        module path and name, checkpoint_sequential's first module of the
        segment, or where it was called and the function's name."""
        owner = None
        while isinstance(function, functools.partial):
            # partial(forward, layer, **kwargs): Hugging Face's
            # GradientCheckpointingLayer checkpoints its forward so.
            if function.args and isinstance(function.args[0], nn.Module) and owner is None:
                owner = function.args[0]
            function = function.func
        owner = getattr(function, "__self__", owner)
        name = getattr(function, "__name__", type(function).__name__)
        if isinstance(owner, nn.Module):
            if name in ("__call__", "forward", "_call_impl", "_wrapped_call_impl"):
                function = owner
            elif id(owner) in trace.paths:
                return _join(trace.paths[id(owner)], name)
        if isinstance(function, nn.Module):
            if id(function) in trace.paths:
                return trace.paths[id(function)]
            children = list(function.children())
            if children and id(children[0]) in trace.paths:
                return trace.paths[id(children[0])]
        code = getattr(function, "__code__", None)
        if code is not None and code.co_qualname.endswith("run_function.<locals>.forward"):
            # checkpoint_sequential's segment: named by its first module.
            cells = dict(zip(code.co_freevars, (c.cell_contents for c in function.__closure__ or ())))
            mods, start = cells.get("functions"), cells.get("start")
            if mods is not None and start is not None and start < len(mods) and id(mods[start]) in trace.paths:
                return trace.paths[id(mods[start])]
        return _join(trace.stack[-1], name.strip("<>")) or "region"
