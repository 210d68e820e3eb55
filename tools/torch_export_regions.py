"""tools/torch_export.py's checkpoint regions: torch.utils.checkpoint's
checkpoint and checkpoint_sequential, while the model is traced, record the
region they are given and leave a marker call in the fx graph."""

import functools

import torch
import torch.fx
import torch.nn as nn
import torch.utils.checkpoint as tcp

from torch_export_errors import ExportError

_REGIONS = []  # the callables of traced checkpoint calls, by index


def _checkpoint_marker(index, *args):
    """What a traced checkpoint call becomes in the fx graph (runs the region)."""
    return _REGIONS[index](*args)


torch.fx.wrap("_checkpoint_marker")


_ROOT = [None]  # the module being exported


class _FunctionRegion(nn.Module):
    """checkpoint(function, *args) of a function (a closure over the model's
    modules, a lambda, a method): traced as a module whose child _model is
    the exported model, so that the modules the function calls keep their
    paths. Named by the function."""

    def __new__(cls, function, arity):
        # fx traces type(module).forward: a class per arity.
        names = ", ".join("a%d" % i for i in range(arity))
        scope = {}
        exec("def forward(self, %s):\n    return self._function(%s)\n" % (names, names), scope)
        sub = type("FunctionRegion", (cls,), {"forward": scope["forward"], "__new__": object.__new__})
        return nn.Module.__new__(sub)

    def __init__(self, function, arity):
        super().__init__()
        self.add_module("_model", _ROOT[0])
        self.label = getattr(function, "__name__", None) or getattr(getattr(function, "func", None), "__name__",
                                                                     type(function).__name__)
        object.__setattr__(self, "_function", function)


class _Patched:
    """Replaces checkpoint and checkpoint_sequential, as the traced code names
    them (torch.utils.checkpoint.X, or a global of the module's source file),
    by versions that record regions instead of running them."""

    def __init__(self, root):
        self.root = root
        self.saved = []

    def __enter__(self):
        orig_cp, orig_seq = tcp.checkpoint, tcp.checkpoint_sequential

        def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, determinism_check="default",
                       debug=False, **kwargs):
            # use_reentrant, preserve_rng_state, determinism_check and debug
            # change how PyTorch recomputes, not what the region computes:
            # remat's region recomputes the same values (dropout's mask
            # included: CONTRACT.md, randomness) under either.
            if kwargs:
                raise ExportError("checkpoint: keyword arguments %s are not supported (remat maps use_reentrant, "
                                  "preserve_rng_state, determinism_check and debug; a context_fn, as selective "
                                  "checkpointing's, is not exported)" % sorted(kwargs))
            owner = getattr(function, "__self__", None)
            if isinstance(owner, nn.Module) and getattr(function, "__name__", None) in (
                    "__call__", "forward", "_call_impl", "_wrapped_call_impl"):
                # checkpoint(block.forward, x), checkpoint(layer.__call__, x)
                # (PyTorch 2's __call__ is the bound _wrapped_call_impl)
                function = owner
            if not isinstance(function, nn.Module) or (type(function).__module__.startswith("torch.nn")
                                                        and not isinstance(function, nn.Sequential)):
                # A function, or one of torch.nn's modules (a leaf: traced as
                # a call, not into its forward).
                function = _FunctionRegion(function, len(args))
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
            # Hugging Face's gradient_checkpointing_enable() keeps
            # functools.partial(checkpoint, **kwargs) on each model as
            # _gradient_checkpointing_func: the same partial over ours.
            for k, v in list(vars(m).items()):
                if isinstance(v, functools.partial) and any(v.func is o for o in replacements):
                    self.saved.append((vars(m), k, v))
                    vars(m)[k] = functools.partial(replacements[orig_cp if v.func is orig_cp else orig_seq],
                                                   *v.args, **v.keywords)
        return self

    def __exit__(self, *exc):
        for target, key, value in reversed(self.saved):
            if isinstance(target, dict):
                target[key] = value
            else:
                setattr(target, key, value)
