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

import math
import operator
import os

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
import functools

import torch.utils.checkpoint as tcp


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


def _trace(module, path, examples):
    """torch.fx's graph of `module` (at `path` of the exported model), traced
    with the example inputs' values beside the proxies (_ConcreteProxy), or an
    ExportError naming the module and what fx could not follow (never fx's
    raw TraceError or TypeError)."""
    tracer = _Tracer(path, examples)
    try:
        with _BuffersKept(module), torch.random.fork_rng():
            return tracer.trace(module)
    except ExportError:
        raise
    except Exception as e:  # fx reports Python it cannot trace in several types
        hint = ""
        if "Proxy" in str(e) or "iterat" in str(e) or "bool" in str(e) or "control flow" in str(e):
            hint = (" (Python that depends on a tensor's value, such as `if x.sum() > 0`, cannot be "
                    "traced: the exported program would hold one branch for every input)")
        # The innermost module fx was in (PyTorch 2 keeps the stack).
        stack = list(getattr(tracer, "module_stack", None) or {})
        inner, owner = path, module
        if stack and stack[-1]:
            try:
                owner = module.get_submodule(stack[-1])
                inner = _join(path, stack[-1])
            except AttributeError:
                pass
        raise ExportError("%s: torch.fx cannot trace %s.forward: %s: %s%s"
                          % (inner or "<root>", type(owner).__name__, type(e).__name__, e, hint))


_CONSTANTS = []  # tensors the traced code made itself (torch.arange(T), torch.ones(...))


def _constant(index):
    """What a tensor the traced code made itself becomes in the fx graph."""
    return _CONSTANTS[index]


def _value(node, root):
    """The value `node` had when the model ran on the example inputs (set
    while tracing; a get_attr's is the attribute itself)."""
    if "val" not in node.meta:
        if node.op != "get_attr":
            raise ExportError("%s: no example value (an fx node the tracer did not run)" % node.name)
        owner = root
        for part in node.target.split("."):
            owner = getattr(owner, part)
        node.meta["val"] = owner
    return node.meta["val"]


class _ConcreteProxy(torch.fx.Proxy):
    """An fx proxy that knows its example value: shapes, sizes, dtypes and
    devices read by the traced code are concrete Python values (`B, T, C =
    x.size()`, `assert t <= block_size`, `torch.arange(T)`), as they are for
    the example inputs; a tensor's values still are not (`if x.sum() > 0`
    is an error)."""

    _ATTRS = ("shape", "device", "dtype", "ndim", "is_cuda", "size", "dim", "numel")

    def __getattr__(self, k):
        if k in _ConcreteProxy._ATTRS and isinstance(self.node.meta.get("val"), torch.Tensor):
            return getattr(self.node.meta["val"], k)
        return super().__getattr__(k)

    def __iter__(self):
        # A tuple's elements (q, k, v = x.split(C, dim=2)), known from the
        # example value: fx's own unpacking reads bytecode, which PyTorch
        # 1.13 cannot on Python 3.11.
        if isinstance(self.node.meta.get("val"), (tuple, list)):
            return iter([self[i] for i in range(len(self.node.meta["val"]))])
        return super().__iter__()

    def __len__(self):
        if "val" in self.node.meta:
            return len(self.node.meta["val"])
        return super().__len__()


class _Tracer(torch.fx.Tracer):
    """Keeps the modules remat maps as leaves; checkpoint calls become
    markers. Runs every node on the example inputs as it records it (the
    proxies are _ConcreteProxy), so that shapes are concrete."""

    def __init__(self, path, examples):
        super().__init__()
        self.path = path
        self.examples = list(examples)
        self.placeholders = 0

    def is_leaf_module(self, m, qualname):
        if isinstance(m, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
            return False
        return type(m).__module__.startswith("torch.nn") or super().is_leaf_module(m, qualname)

    def proxy(self, node):
        return _ConcreteProxy(node, self)

    # While a node runs on the example values (self.running), modules and
    # attributes are the real ones, not recorded again.
    running = False

    def call_module(self, m, forward, args, kwargs):
        if self.running:
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self.running:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def _module_getattr(self, attr, attr_val, parameter_proxy_cache):  # PyTorch 1.13's name
        if self.running:
            return attr_val
        return super()._module_getattr(attr, attr_val, parameter_proxy_cache)

    def create_arg(self, a):
        # A tensor the traced code made (not a parameter or buffer of the
        # model): a constant node, not an attribute fx would add to the model.
        if isinstance(a, torch.Tensor) and not isinstance(a, nn.Parameter) \
                and not any(a is b for b in self.root.buffers()):
            _CONSTANTS.append(a)
            node = self.create_node("call_function", _constant, (len(_CONSTANTS) - 1,), {})
            node.meta["val"] = a
            return node
        return super().create_arg(a)

    def create_proxy(self, kind, target, args, kwargs, *rest, **kw):
        p = super().create_proxy(kind, target, args, kwargs, *rest, **kw)
        node = p.node
        if kind == "placeholder":
            if self.placeholders >= len(self.examples):
                raise ExportError("%s: forward has more inputs than the %d example inputs given"
                                  % (self.path or "<root>", len(self.examples)))
            node.meta["val"] = self.examples[self.placeholders]
            self.placeholders += 1
            return p
        self.running = True  # getattr on the model, below, is fx's patched one: make it the real one
        try:
            if kind == "get_attr":
                _value(node, self.root)
                return p
            a, k = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: _value(n, self.root))
            with torch.no_grad():
                if kind == "call_function":
                    node.meta["val"] = target(*a, **k)
                elif kind == "call_method":
                    node.meta["val"] = getattr(a[0], target)(*a[1:], **k)
                elif kind == "call_module":
                    node.meta["val"] = self.root.get_submodule(target)(*a, **k)
        except ExportError:
            raise
        except Exception as e:
            where = _join(self.path, target) if kind == "call_module" else (self.path or "<root>")
            raise ExportError("%s: running %s %s on the example inputs failed: %s: %s"
                              % (where, kind, getattr(target, "__name__", target), type(e).__name__, e))
        finally:
            self.running = False
        return p


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


def _join(prefix, name):
    return prefix + "." + name if prefix and name else prefix or name


def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


_INTEGER = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8, torch.bool)
# Folded constants that are not buffers, shared by value: one input for the
# causal mask every attention layer uses.
_SHARED = []
# Integer inputs of forward that the program reads reshaped (targets.view(-1)):
# program id -> the shape the program declares them with.
_RESHAPED = {}
# Tensors the model uses both as an nn.Linear's weight and otherwise (a tied
# embedding): written as they are, with a transpose op for the Linear.
_TIED = set()


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


class _Folded:
    """A tensor computed from the model's buffers and constants alone (a
    causal mask from a registered buffer, torch.arange(T)): folded at export,
    it becomes an input of the program when an op reads it, named by the
    buffer's path (`buffer` true: the buffer itself, under its own path) or
    by what was derived from it."""

    def __init__(self, value, name, buffer=False):
        self.value = value
        self.name = name
        self.buffer = buffer


class _Pieces:
    """What split and chunk return: the pieces of x along `axis`, as
    (start, length) pairs; indexing one is a slice op."""

    def __init__(self, x, axis, bounds):
        self.x, self.axis, self.bounds = x, axis, bounds


class _Env(dict):
    """Node -> program id (or _Const, _Pieces); a _Folded value read as a
    program id becomes an input of the body (`materialize`)."""

    def __init__(self, materialize):
        super().__init__()
        self.materialize = materialize

    def __getitem__(self, node):
        v = dict.__getitem__(self, node)
        return self.materialize(v) if isinstance(v, _Folded) else v

    def raw(self, node):
        return dict.get(self, node)


class _Writer:
    def __init__(self):
        self.count = 0

    def fresh(self):
        self.count += 1
        return "v%d" % self.count


# The child name under which export(loss=callable) wraps the model: paths in
# the wrapper start with it, and the program names them without it.
_WRAPPED = "model"
_UNWRAP = [False]


def _unwrapped(path):
    if _UNWRAP[0]:
        if path == _WRAPPED:
            return ""
        if path.startswith(_WRAPPED + "."):
            return path[len(_WRAPPED) + 1:]
    return path


def _tensor_names(root):
    """id(tensor) -> its full path in `root`, for every parameter and buffer.

    A tensor reachable by two paths (a tied weight) has one name, the first
    that named_parameters() or named_buffers() gives, so that it is one
    input of the program and its gradient is the sum over its uses."""
    names = {}
    for n, t in list(root.named_parameters()) + list(root.named_buffers()):
        names.setdefault(id(t), _unwrapped(n))
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

    def data_ids(self):
        """The inputs that are not trained parameters (buffers, folded
        constants, the dropout seed): `data` in the program."""
        return {pid for pid, _, t, _ in self.by_key.values() if not isinstance(t, nn.Parameter)}

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
    current = [None]  # the node being converted: a folded value read by it is named after it

    def materialize(f, hint=None):
        if f.buffer:
            return params.get(f.name, f.value, False)
        value = f.value
        for other in _SHARED:
            if other.shape == value.shape and other.dtype == value.dtype and torch.equal(other, value):
                value = other
                break
        else:
            _SHARED.append(value)
        name = f.name or _join(module_path(current[0]) if current[0] is not None else prefix, hint or "constant")
        return params.get(name, value, False)

    env = _Env(materialize)
    placeholders = iter(arg_ids)
    paths = {id(m): _unwrapped(n) for n, m in root.named_modules()}
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

    def module_path(node):
        """The full path of the module whose code made `node` (the innermost
        module fx was in; for a module call, the module itself)."""
        if node.op == "call_module":
            return paths.get(id(mods[node.target]), _join(prefix, node.target))
        stack = node.meta.get("nn_module_stack") or {}
        for key in reversed(list(stack)):
            try:
                m = traced.get_submodule(key)
            except AttributeError:
                continue
            if id(m) in paths:
                return paths[id(m)]
        return prefix

    def where(node):
        if node.op == "call_module":
            return module_path(node) or "<root>"
        return "%s (%s)" % (module_path(node) or "<root>", node.name)

    def param(module, attr, node, transposed=False):
        tensor = getattr(module, attr)
        return params.get(tensor_path(tensor, module, attr, node), tensor, transposed)

    def shape(node):
        v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        return tuple(v.shape) if isinstance(v, torch.Tensor) else None

    def dtype(node):
        v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        return v.dtype if isinstance(v, torch.Tensor) else torch.float32

    def emit(op, inputs, node, attrs="", typed=True, out_shape=None):
        if any(not isinstance(i, str) for i in inputs):
            fail(node, "%s of a Python value computed from shapes (a tensor is expected)" % op)
        out = writer.fresh()
        s = out_shape if out_shape is not None else shape(node) if node is not None and typed else None
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
            if name == "add" and sa is not None and sb is not None:
                if len(sb) > len(sa):
                    a, b, sa, sb = b, a, sb, sa
                trail = tuple(sb)
                while trail and trail[0] == 1 and len(trail) > 1:
                    trail = trail[1:]
                if trail and len(trail) < len(sa) and tuple(sa[len(sa) - len(trail):]) == trail:
                    return broadcast_add(node, a, b, sa, trail)
            fail(node, "%s of shapes %s and %s (broadcasting)" % (name, sa, sb))
        fail(node, "%s(%r, %r)" % (name, a, b))

    def reshaped(x, dims, node):
        """x (a program id) reshaped to dims, or x when it has them already."""
        return emit("reshape", [x], node, " ints=[%s]" % ",".join(str(d) for d in dims), out_shape=tuple(dims))

    def broadcast_add(node, a, b, sa, trail):
        """a (..., *trail) + b (trail, after leading 1s): bias_add on a viewed
        as rows of prod(trail) elements (b's gradient is the sum over rows,
        as PyTorch's broadcasting gives)."""
        n = int(np.prod(trail))
        rows = int(np.prod(sa)) // n
        x = reshaped(env[a], (rows, n), node) if len(sa) != 2 or len(trail) != 1 else env[a]
        bias = reshaped(env[b], (n,), node) if tuple(shape(b)) != (n,) else env[b]
        y = emit("bias_add", [x, bias], node, out_shape=(rows, n))
        return reshaped(y, sa, node) if tuple(sa) != (rows, n) else y

    def matmul(node, a, b, sa, sb):
        """PyTorch's matmul on rank 2 to 4 as remat's (rank 2, or batched
        rank 3): leading axes merged by reshapes. Broadcasting a batch is not
        taken."""
        out = tuple(shape(node))
        if len(sa) in (2, 3) and len(sb) == len(sa):
            return emit("matmul", [env[a], env[b]], node)
        if len(sa) >= 3 and len(sb) == 2:  # (..., k) @ (k, n): rows
            rows = int(np.prod(sa[:-1]))
            y = emit("matmul", [reshaped(env[a], (rows, sa[-1]), node), env[b]], node, out_shape=(rows, sb[1]))
            return reshaped(y, out, node)
        if len(sa) == len(sb) == 4 and sa[:2] == sb[:2]:
            batch = sa[0] * sa[1]
            y = emit("matmul", [reshaped(env[a], (batch,) + tuple(sa[2:]), node),
                                reshaped(env[b], (batch,) + tuple(sb[2:]), node)], node,
                     out_shape=(batch, sa[2], sb[3]))
            return reshaped(y, out, node)
        fail(node, "matmul of shapes %s and %s (remat's: rank 2, batched rank 3 or 4 with equal batch "
             "axes, or (..., k) @ (k, n))" % (sa, sb))

    def linear(node, m, x):
        """nn.Linear on (..., in): matmul with W^T (written transposed, or a
        transpose op when W is tied to another use), + bias."""
        sx = shape(x)
        if sx is None or len(sx) < 2:
            fail(node, "nn.Linear on a rank-%s input (remat's matmul needs (..., in) with a row axis)"
                 % (len(sx) if sx is not None else "?"))
        if id(m.weight) in _TIED:
            w = emit("transpose", [param(m, "weight", node)], node, out_shape=tuple(m.weight.t().shape))
        else:
            w = param(m, "weight", node, transposed=True)
        rows = int(np.prod(sx[:-1]))
        xr = env[x] if len(sx) == 2 else reshaped(env[x], (rows, sx[-1]), node)
        y = emit("matmul", [xr, w], node, out_shape=(rows, m.out_features))
        if m.bias is not None:
            y = emit("bias_add", [y, param(m, "bias", node)], node, out_shape=(rows, m.out_features))
        return y if len(sx) == 2 else reshaped(y, shape(node), node)

    def permute(node, x, perm):
        perm = [int(d) % len(shape(x)) for d in perm]
        if perm == list(range(len(perm))):
            return env[x]
        if len(perm) in (2, 3) and perm == list(range(len(perm) - 2)) + [len(perm) - 1, len(perm) - 2]:
            return emit("transpose", [env[x]], node)
        return emit("permute", [env[x]], node, " ints=[%s]" % ",".join(str(d) for d in perm))

    def mask_of(node, mask, target_shape, keep_where):
        """A folded boolean mask as remat's masked_fill's: i32, the target's
        shape, 1 where the fill goes. keep_where: the mask marks what is kept
        (attn_mask), not what is filled (masked_fill)."""
        f = env.raw(mask) if isinstance(mask, torch.fx.Node) else None
        if not isinstance(f, _Folded):
            fail(node, "a mask computed from the model's inputs (remat's masked_fill takes a mask fixed at "
                 "export: one made from buffers, shapes and constants, such as a causal mask)")
        m = f.value.to(torch.bool)
        if keep_where:
            m = ~m
        try:
            m = m.expand(target_shape).to(torch.int32).contiguous()
        except RuntimeError:
            fail(node, "a mask of shape %s on scores %s" % (tuple(f.value.shape), target_shape))
        return materialize(_Folded(m, (f.name + ".mask") if f.name else None), "mask")

    def attention(node, args, kwargs):
        """F.scaled_dot_product_attention as its definition: softmax(q k^T *
        scale + mask) v, with dropout on the probabilities."""
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        a = dict(zip(names, args))
        a.update(kwargs)
        q, k, v = a["query"], a["key"], a["value"]
        sq, sk, sv = shape(q), shape(k), shape(v)
        if a.get("enable_gqa") or len(sq) != 4 or sk != sv or sq[:2] != sk[:2] or sq[3] != sk[3]:
            fail(node, "scaled_dot_product_attention of q %s, k %s, v %s (remat's: (B, H, T, D) each, "
                 "no grouped query attention)" % (sq, sk, sv))
        scores_shape = (sq[0], sq[1], sq[2], sk[2])
        kt = emit("permute", [env[k]], node, " ints=[0,1,3,2]", out_shape=(sk[0], sk[1], sk[3], sk[2]))
        batch = sq[0] * sq[1]
        s = emit("matmul", [reshaped(env[q], (batch, sq[2], sq[3]), node),
                            reshaped(kt, (batch, sk[3], sk[2]), node)], node, out_shape=(batch, sq[2], sk[2]))
        s = reshaped(s, scores_shape, node)
        scale = a.get("scale")
        s = emit("scale", [s], node, " scalar=%r" % (float(scale) if scale is not None else 1.0 / math.sqrt(sq[3])),
                 out_shape=scores_shape)
        if a.get("is_causal"):
            causal = torch.ones(sq[2], sk[2], dtype=torch.bool).tril().logical_not()
            mask = materialize(_Folded(causal.expand(scores_shape).to(torch.int32).contiguous(), None),
                               "causal_mask")
            s = emit("masked_fill", [s, mask], node, " scalar=-inf", out_shape=scores_shape)
        if a.get("attn_mask") is not None:
            if dtype(a["attn_mask"]) != torch.bool:
                fail(node, "scaled_dot_product_attention with a float attn_mask (remat's: a boolean mask)")
            s = emit("masked_fill", [s, mask_of(node, a["attn_mask"], scores_shape, True)], node,
                     " scalar=-inf", out_shape=scores_shape)
        p = emit("softmax", [s], node, out_shape=scores_shape)
        dropout_p = a.get("dropout_p", 0.0) or 0.0
        if dropout_p:
            p = dropout_value(node, dropout_p, p, scores_shape)
        y = emit("matmul", [reshaped(p, (batch, sq[2], sk[2]), node), reshaped(env[v], (batch,) + sv[2:], node)],
                 node, out_shape=(batch, sq[2], sv[3]))
        return reshaped(y, shape(node), node)

    def index(node, x, key):
        """x[...] with slices of step 1 (and ...): one slice op per axis cut."""
        sx = shape(x)
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (len(sx) - len(key) + 1) + key[i + 1:]
        if len(key) > len(sx) or not all(isinstance(k, slice) and k.step in (None, 1) for k in key):
            fail(node, "indexing with %r (remat's slice takes ranges of step 1 on each axis)" % (key,))
        y, cur = env[x], list(sx)
        for axis, k in enumerate(key):
            start, stop, _ = k.indices(sx[axis])
            if (start, stop) == (0, sx[axis]):
                continue
            cur[axis] = max(stop - start, 0)
            y = emit("slice", [y], node, " ints=[%d,%d,%d]" % (axis, start, cur[axis]), out_shape=tuple(cur))
        return y

    def layer_norm(node, args, kwargs):
        a = dict(zip(("input", "normalized_shape", "weight", "bias", "eps"), args))
        a.update(kwargs)
        x, eps = a["input"], a.get("eps", 1e-5)
        c = shape(x)[-1]
        if tuple(concrete(a["normalized_shape"])) != (c,) or eps != 1e-5 or a.get("weight") is None:
            fail(node, "F.layer_norm(normalized_shape=%s, weight=%s, eps=%g) (remat's: the last axis, "
                 "a weight, eps 1e-5)" % (tuple(concrete(a["normalized_shape"])), a.get("weight") is not None, eps))
        bias = env[a["bias"]] if a.get("bias") is not None else materialize(
            _Folded(torch.zeros(c), None), "zero_bias")
        return emit("layer_norm", [env[x], env[a["weight"]], bias], node)

    def reshape_integer(node, x):
        """A view of an integer input of forward (targets.view(-1)): the
        program declares that input with the view's shape (no op yields an
        integer value). Only where every use of the input is that view."""
        if x.op != "placeholder" or prefix or traced is not root:
            fail(node, "a reshape of integer values that are not an input of forward")
        if any(u.target not in (torch.flatten, "flatten", "view", "reshape", torch.reshape)
               or shape(u) != shape(node) for u in x.users):
            fail(node, "a reshape of the integer input %r, which is also used unreshaped (remat's "
                 "programs reshape no integer value: give the input in the shape it is used in)" % x.target)
        _RESHAPED[env[x]] = shape(node)
        return env[x]

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
        return dropout_value(node, p, env[x], shape(node))

    def dropout_value(node, p, x, out_shape):
        if not 0 < p < 1:
            fail(node, "dropout with p=%r (remat's takes p in [0, 1))" % p)
        seed = params.get("dropout_seed", _DROPOUT_SEED[0], False)
        _DROPOUT_KEYS[0] += 1
        return emit("dropout", [x, seed], node, " scalar=%r ints=[%d]" % (float(p), _DROPOUT_KEYS[0]),
                    out_shape=out_shape)

    def cross_entropy(node, weight, ignore_index, reduction, label_smoothing, logits, targets):
        if weight is not None or reduction != "mean" or label_smoothing:
            fail(node, "cross_entropy(weight=%s, reduction=%r, label_smoothing=%r) (remat's: no weight, "
                 "the mean over rows, no smoothing)" % (weight is not None, reduction, label_smoothing))
        if shape(logits) is None or len(shape(logits)) != 2:
            fail(node, "cross_entropy of logits %s (remat's takes (N, C))" % (shape(logits),))
        # remat's cross_entropy refuses a target outside 0..C-1: an ignored
        # target in a later input is an error there, not a different loss.
        t = _value(targets, root) if isinstance(targets, torch.fx.Node) else None
        if isinstance(t, torch.Tensor) and bool((t == ignore_index).any()):
            fail(node, "cross_entropy with ignore_index=%d and targets that hold it (remat's averages over "
                 "every row)" % ignore_index)
        return emit("cross_entropy", [env[logits], env[targets]], node)

    def foldable(node):
        """Whether every tensor `node` reads is folded (buffers, constants)
        and at least one is: then its value is the example run's, fixed."""
        found = []
        torch.fx.node.map_arg((node.args, node.kwargs), found.append)
        vals = [env.raw(a) for a in found]
        return any(isinstance(v, _Folded) for v in vals) and all(isinstance(v, (_Folded, _Const)) for v in vals)

    def fold(node):
        v = _value(node, root)
        if not isinstance(v, torch.Tensor):
            return _Const(v)
        found = []
        torch.fx.node.map_arg((node.args, node.kwargs), found.append)
        origin = next((env.raw(a).name for a in found if isinstance(env.raw(a), _Folded) and env.raw(a).name), None)
        op = getattr(node.target, "__name__", node.target)
        return _Folded(v, _join(origin, str(op).strip("_")) if origin else None)

    for node in gm.graph.nodes:
        current[0] = node
        try:
            if node.op == "placeholder":
                env[node] = next(placeholders)
            elif node.op == "get_attr":
                owner, tensor = _resolve(traced, node.target, where(node))
                if not isinstance(tensor, torch.Tensor):
                    fail(node, "get_attr %r of type %s (only tensors)" % (node.target, type(tensor).__name__))
                attr = node.target.rpartition(".")[2]
                if isinstance(tensor, nn.Parameter):
                    env[node] = param(owner, attr, node)
                else:  # a buffer: folded where it is only read through constants
                    env[node] = _Folded(tensor, tensor_path(tensor, owner, attr, node), buffer=True)
            elif node.op == "output":
                return env[node.args[0]]
            elif node.op == "call_function" and node.target is _constant:
                env[node] = _Folded(_value(node, root), None)
            elif node.op in ("call_function", "call_method") and node.target is not _checkpoint_marker \
                    and foldable(node):
                env[node] = fold(node)
            elif node.op == "call_module":
                m = mods[node.target]
                x = node.args[0]
                if isinstance(m, nn.Linear):
                    env[node] = linear(node, m, x)
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
                if not all(isinstance(a, torch.fx.Node) for a in inner_args):
                    fail(node, "checkpoint with a non-tensor argument %r (remat's regions take tensors)"
                         % next(a for a in inner_args if not isinstance(a, torch.fx.Node)))
                path = paths.get(id(region))
                # A region checkpoint_sequential made is a new nn.Sequential of
                # the root's modules: named by its first module's path.
                if isinstance(region, _FunctionRegion):
                    # A module's path, or where it was called and the function's name.
                    sub_prefix = paths.get(id(region._function)) or _join(module_path(node), region.label.strip("<>"))
                else:
                    sub_prefix = path if path is not None else paths.get(id(next(region.children(), None)), prefix)
                with _Patched(region):
                    graph = _trace(region, sub_prefix, [_value(a, root) for a in inner_args])
                sub = torch.fx.GraphModule(region, graph)
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
                lines.append("%s%%%s: %s = checkpoint(%s) name=%s policy=\"nothing_saveable\" @ %s {"
                             % (indent, y, _type(shape(node)), ", ".join("%" + i for i in outer_inputs),
                                _quote(sub_prefix or "region"), _quote(sub_prefix or "<root>")))
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
                    item = env.get(args[0]).value[concrete(args[1])]
                    # A piece of a folded tensor's split is folded too.
                    env[node] = _Folded(item, None) if isinstance(item, torch.Tensor) else _Const(item)
                elif t in names:
                    env[node] = binary(node, args[0], args[1], names[t])
                elif t in (operator.matmul, torch.matmul, torch.mm, torch.bmm, "matmul"):
                    env[node] = matmul(node, args[0], args[1], shape(args[0]), shape(args[1]))
                elif t in ("split", torch.split, "chunk", torch.chunk):
                    x = args[0]
                    kw = dict(zip(("size_or_chunks", "dim"), args[1:]))
                    kw.update(kwargs)
                    n = kw.get("split_size_or_sections", kw.get("split_size", kw.get("chunks", kw.get("size_or_chunks"))))
                    axis = int(kw.get("dim", 0)) % len(shape(x))
                    pieces = _value(node, root)
                    starts = np.cumsum([0] + [p.shape[axis] for p in pieces])
                    env[node] = _Pieces(x, axis, [(int(a), int(b - a)) for a, b in zip(starts[:-1], starts[1:])])
                elif t is operator.getitem and isinstance(env.raw(args[0]), _Pieces):
                    pieces = env.raw(args[0])
                    start, length = pieces.bounds[concrete(args[1])]
                    env[node] = emit("slice", [env[pieces.x]], node, " ints=[%d,%d,%d]" % (pieces.axis, start, length))
                elif t is operator.getitem and isinstance(args[0], torch.fx.Node):
                    env[node] = index(node, args[0], concrete(args[1]))
                elif t in ("permute", torch.permute):
                    dims = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
                    env[node] = permute(node, args[0], kwargs.get("dims", dims))
                elif t == "contiguous":
                    env[node] = env[args[0]]
                elif t in ("masked_fill", torch.masked_fill):
                    value = concrete(args[2] if len(args) > 2 else kwargs.get("value"))
                    if not isinstance(value, (int, float)):
                        fail(node, "masked_fill with a tensor value (remat's fills with a number)")
                    mask = mask_of(node, args[1] if len(args) > 1 else kwargs.get("mask"), shape(args[0]), False)
                    env[node] = emit("masked_fill", [env[args[0]], mask], node, " scalar=%r" % float(value))
                elif t is getattr(F, "scaled_dot_product_attention", None) and t is not None:
                    env[node] = attention(node, args, kwargs)
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
                    rank = len(shape(args[0]))
                    d0, d1 = (concrete(d) % rank for d in args[1:3])
                    perm = list(range(rank))
                    perm[d0], perm[d1] = perm[d1], perm[d0]
                    env[node] = permute(node, args[0], perm)
                elif t in ("t", torch.t) or (node.op == "call_function" and t is getattr and args[1] == "mT"):
                    env[node] = emit("transpose", [env[args[0]]], node)
                elif t == "softmax":
                    dim = args[1] if len(args) > 1 else kwargs.get("dim")
                    if dim not in (-1, len(shape(args[0])) - 1):
                        fail(node, "softmax over dim %r (remat's is over the last axis)" % dim)
                    env[node] = emit("softmax", [env[args[0]]], node)
                elif t is F.layer_norm:
                    env[node] = layer_norm(node, args, kwargs)
                elif t in (torch.flatten, "flatten", "view", "reshape", torch.reshape):
                    # The output's shape, as the example run found it (x.view(x.size(0), -1) included).
                    if dtype(args[0]) in _INTEGER:
                        env[node] = reshape_integer(node, args[0])
                    else:
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


def _tied_linear_weights(root):
    """ids of the nn.Linear weights the model also uses otherwise (a token
    embedding tied to the LM head)."""
    linear, other = set(), set()
    for m in root.modules():
        for n, p in m.named_parameters(recurse=False):
            (linear if isinstance(m, nn.Linear) and n == "weight" else other).add(id(p))
    return linear & other


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
    if len(_ERRORS) == 1:
        raise ExportError(_ERRORS[0])
    if _ERRORS:
        raise ExportError("%d uses in the model are not supported by remat's op set "
                          "(tools/torch_export.py lists what is):\n%s"
                          % (len(_ERRORS), "\n".join("  " + e.replace(_UNSUPPORTED, "") for e in _ERRORS)))
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
    # Parameters are differentiated by default (remat run without --wrt);
    # buffers, folded constants and forward's inputs (images, ids, targets)
    # are data.
    data = params.data_ids() | set(input_ids)
    decls = ["%s: %s%s" % (pid, _type(t.shape, t.dtype), " data" if pid in data else "") for pid, t in exported]
    example_inputs = [x.reshape(_RESHAPED[i]) if i in _RESHAPED else x for i, x in zip(input_ids, example_inputs)]
    decls += ["%s: %s data" % (i, _type(x.shape, x.dtype)) for i, x in zip(input_ids, example_inputs)]
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
