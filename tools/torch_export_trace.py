"""tools/torch_export.py's trace: the model run eagerly on the example inputs
under a TorchDispatchMode, so that whatever Python it runs (Hugging Face's
plumbing, tuples, closures, casts, loss modules built in forward) is simply
executed and only the ATen ops it reduces to are recorded, each with the
module path it ran in (global forward pre/post hooks).

Every tensor an op reads or makes is a Value, by identity: a parameter or
buffer (named by its first full path), an example input, or an op's output;
an in-place op makes a new Value for the tensor it writes. A Value is live
when it depends on a float parameter or a float example input; the others
(masks, position ids, shifted labels, arange) are constants whose contents
are kept as the op made them, and become inputs of the program where a live
op reads them. Values made by random ops (bernoulli_, dropout's noise) are
random."""

import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend
from torch.nn.modules import module as module_hooks
from torch._decomp import decomposition_table
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from torch_export_errors import ExportError

# Ops whose output does not depend on their input's values, only its shape.
_SHAPE_ONLY = {"empty_like", "zeros_like", "ones_like", "full_like", "new_empty", "new_zeros", "new_ones",
               "new_full", "empty_strided", "sym_size", "sym_numel", "sym_stride"}

# Ops that only reshape, select or copy their first input.
_VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "expand", "slice", "select", "_to_copy", "clone",
          "contiguous", "alias", "permute", "transpose", "t", "lift_fresh", "detach", "flatten"}


def _join(prefix, name):
    return prefix + "." + name if prefix and name else prefix or name


class Value:
    """One tensor of the trace. kind: "param" (an nn.Parameter), "buffer",
    "input" (an example input), "live", "const", "random"."""

    def __init__(self, index, kind, tensor, name=None, path="", label=""):
        self.index, self.kind = index, kind
        self.shape, self.dtype = tuple(tensor.shape), tensor.dtype
        # The contents of a constant (as made), a parameter or buffer (as
        # before the forward) or an example input; None for live values.
        self.tensor = tensor if kind != "live" else None
        self.name = name  # a parameter's, buffer's or input's name
        self.path, self.label = path, label  # the module and op that made it

    @property
    def live(self):
        return self.kind in ("param", "live") or (self.kind == "input" and self.dtype.is_floating_point)


class Call:
    """One ATen op as it ran: args and kwargs with every tensor a Value, outs
    the flat list of its output Values (None for a non-tensor output), and the
    module path it ran in."""

    def __init__(self, func, args, kwargs, outs, path, note=None):
        self.func, self.args, self.kwargs, self.outs, self.path, self.note = func, args, kwargs, outs, path, note

    @property
    def name(self):
        """"add.Tensor": the op without a trailing _ (in place) and its overload."""
        return op_key(self.func)


class Trace:
    """The events of one forward pass: Calls, and the checkpoint regions'
    begin and end (torch_export_regions.py appends those)."""

    def __init__(self, root, inputs, fixed_decisions=False):
        self.events, self.values, self.tensors = [], {}, {}
        # Integer and boolean results computed from the model's values
        # (topk's and sort's indices, argmax, a comparison's mask): with
        # fixed_decisions, constants as this run made them (export's
        # docstring); the (module path, op) of each either way.
        self.fixed_decisions, self.decisions = fixed_decisions, []
        # Shapes only (every tensor on the meta device): the choices that
        # depend on values are taken the common way, each noted here as
        # (module path, op, what was assumed) for the program's header.
        self.shapes_only, self.assumed = _shapes_only(root, inputs), []
        # Shapes only: a constant's contents where they are known (computed
        # on the CPU from the integer inputs, arange, ...), by the meta
        # tensor's id, so that Python reading one (.item(), `if mask.all()`)
        # and the program's constants see real values.
        self.shadow = {}
        self.paths = {}
        for path, m in root.named_modules():
            self.paths.setdefault(id(m), path)
        self.stack = [""]
        self.count = 0
        self.storages = {}  # storage address -> the ids of the tensors seen that use it
        # A slice or select's output tensor id -> (its base tensor, the
        # functional op that writes the view back into the base, its args
        # after (base, src)): a write into the view is followed by that op.
        self.views = {}
        # Parameters and buffers by identity, their first path (a tied weight:
        # one Value), their contents as before the forward.
        for n, t in list(root.named_parameters()) + list(root.named_buffers()):
            if id(t) not in self.values:
                kind = "param" if isinstance(t, nn.Parameter) and t.dtype.is_floating_point else "buffer"
                self.add(t, kind, t.detach().clone(), name=n)
        # Tensor attributes of modules (neither parameter nor buffer).
        for path, m in root.named_modules():
            for k, t in vars(m).items():
                if isinstance(t, torch.Tensor) and id(t) not in self.values:
                    self.add(t, "const", t.detach().clone(), path=path, label=k)
        for name, t in inputs:
            if id(t) not in self.values:
                self.add(t, "input", t.detach().clone(), name=name)

    def assume(self, path, op, what):
        """Notes a value-dependent choice taken the common way (shapes
        only); returns False, the note of the common case."""
        self.assumed.append((path, op, what))
        return False

    def add(self, t, kind, snapshot, name=None, path="", label=""):
        v = Value(self.count, kind, snapshot if snapshot is not None else t, name, path, label)
        v.tensor_id = id(t)
        if kind == "live":
            v.tensor = None
        self.count += 1
        if id(t) not in self.values:
            self.storages.setdefault(_storage_key(t), set()).add(id(t))
        self.values[id(t)] = v
        # Alive, so that ids stay unique for the whole trace. (Weak
        # references, with a tensor's entries dropped when it dies and its
        # identity (id, tensors with that id gone), took GPT-2 small's
        # export at 2 x 1024 tokens from 18 GB to 10.5; not kept until the
        # whole model sweep has run on it: issue 65.)
        self.tensors[id(t)] = t
        return v


    def value(self, t):
        """The Value of tensor t now; a tensor first met here (one Python made
        in forward) is a constant, named by the module that read it."""
        v = self.values.get(id(t))
        if v is None:
            v = self.add(t, "const", self.contents(t), path=self.stack[-1], label="const")
        return v

    def contents(self, t):
        """A copy of t's contents: its shadow's, shapes only, where known."""
        shadow = self.shadow.get(id(t)) if t.is_meta else None
        return (shadow if shadow is not None else t).detach().clone()

    def module_pre(self, module, args):
        self.stack.append(self.paths.get(id(module), self.stack[-1]))

    def module_post(self, module, args, output):
        if len(self.stack) > 1:
            self.stack.pop()


def _to_values(trace, x):
    if isinstance(x, torch.Tensor):
        return trace.value(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_values(trace, y) for y in x)
    return x


def _storage_key(t):
    """What identifies t's storage among the tensors the trace holds (on the
    meta device every storage's address is 0)."""
    if t.layout != torch.strided:
        return None
    return ("meta", t.untyped_storage()._cdata) if t.is_meta else t.untyped_storage().data_ptr()


def _shapes_only(root, inputs):
    """Whether the model is on the meta device (export then traces shapes
    only); its float buffers and float example inputs must be too, integer
    ones may be real (token ids: what the model computes from them is then
    known); an ExportError where that does not hold."""
    tensors = ([("parameter " + n, t) for n, t in root.named_parameters()] +
               [("buffer " + n, t) for n, t in root.named_buffers()] +
               [("input " + n, t) for n, t in inputs if isinstance(t, torch.Tensor)])
    meta = [n for n, t in tensors if t.is_meta]
    real = [n for n, t in tensors if not t.is_meta and (t.is_floating_point() or t.is_complex())]
    if meta and real:
        real = real[0]
        raise ExportError("%s is on the meta device and %s is not: a shapes-only export needs the model and its "
                          "float example inputs all on the meta device (built under `with torch.device(\"meta\")`)"
                          % (meta[0], real))
    return bool(meta)


def op_key(func):
    """"add.Tensor": an ATen op's name without a trailing _ (in place) and
    its overload, as the op table (torch_export_ops.TABLE) is keyed."""
    s = func._schema
    return "%s.%s" % (s.name.split("::")[-1].rstrip("_"), s.overload_name or "default")


def _has_ties(x, values, dim, keepdim):
    """Whether a row of x along dim holds its extremum `values` more than once."""
    if x.dim() == 0:
        return False
    with torch.no_grad():
        v = values if keepdim else values.unsqueeze(dim)
        return bool(((x == v).sum(dim) > 1).any())


def _strided_index(x, size, stride, storage_offset=None):
    """The element of x (its number in x's own order) that each element of
    x.as_strided(size, stride, storage_offset) reads, from x's storage as it
    is (the trace sees its real strides); None where one reads storage
    outside x's elements, or where x itself reads a storage element twice."""
    with torch.no_grad():
        n = x.untyped_storage().nbytes() // max(x.element_size(), 1)
        pos = torch.full((n,), -1, dtype=torch.int64)
        numbers = torch.arange(x.numel(), dtype=torch.int64).reshape(x.shape)
        try:
            own = pos.as_strided(x.shape, x.stride(), x.storage_offset())
            own.copy_(numbers)
            if not torch.equal(own, numbers):
                return None
            offset = x.storage_offset() if storage_offset is None else storage_offset
            index = pos.as_strided(size, stride, offset).clone()
        except RuntimeError:
            return None
        return None if index.numel() and int(index.min()) < 0 else index


def _positions(t):
    """The storage element each element of t reads."""
    index = torch.full(tuple(t.shape), t.storage_offset(), dtype=torch.int64)
    for d, (n, step) in enumerate(zip(t.shape, t.stride())):
        index += (torch.arange(n, dtype=torch.int64) * step).reshape([-1 if i == d else 1 for i in range(t.dim())])
    return index.flatten()


def _overlaps(a, b):
    """Whether a and b, views of one storage, read a common element of it.
    Disjoint views of one storage are common (GRU's gates: an in-place
    sigmoid on one chunk of a row while the others are read later); assumed
    to overlap where the dtypes differ or the views are large."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    if a.dtype != b.dtype or a.numel() + b.numel() > 1 << 22:
        return True
    with torch.no_grad():
        return bool(torch.isin(_positions(a), _positions(b)).any())


def _writes(func):
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


class _Dispatch(TorchDispatchMode):
    def __init__(self, trace, mapped):
        super().__init__()
        self.trace, self.mapped = trace, mapped

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        trace = self.trace
        vargs, vkwargs = _to_values(trace, args), {k: _to_values(trace, v) for k, v in kwargs.items()}
        if (self.mapped is not None and op_key(func) not in self.mapped and func in decomposition_table
                and not _writes(func) and torch.Tag.nondeterministic_seeded not in func.tags
                and any(v.live for v in tree_flatten((vargs, vkwargs))[0] if isinstance(v, Value))):
            # An op the table does not map (baddbmm, upsampling, addcmul) is
            # run as PyTorch's own decomposition of it, under this mode
            # again, so the ops it reduces to are what is recorded: one
            # definition, PyTorch's, instead of a second one here. Outputs
            # equal the op's up to float32 rounding; the judgement is against
            # float64 anyway. Where the decomposition reaches an op on the
            # model's values that the table does not map either (softshrink's
            # mask from the values), it is taken back and the op
            # itself recorded, so that an error names the op the model ran.
            mark = len(trace.events)
            with self:
                result = decomposition_table[func](*args, **kwargs)
            if all(op_key(c.func) in self.mapped or not any(o is not None and o.kind == "live" for o in c.outs)
                   for c in trace.events[mark:]):
                return result
            del trace.events[mark:]
        # An in-place write into a tensor whose storage another tensor shares
        # (a view, .detach(), .data) changes values the trace holds apart:
        # the others' ids are noted, and the lowering refuses the write only
        # if one of them is read later (an in-place dropout on a flatten's
        # view, its base never read again, is a plain write). A write into a
        # parameter or input that requires grad is always refused.
        written = [a for a, spec in zip(args, func._schema.arguments)
                   if isinstance(a, torch.Tensor) and spec.alias_info is not None and spec.alias_info.is_write]
        sharers = set()
        for a in written:
            sharers |= {sid for sid in trace.storages.get(_storage_key(a), set()) - {id(a)}
                        if sid not in trace.tensors or _overlaps(trace.tensors[sid], a)}
        aliased = any(trace.value(a).kind in ("param", "buffer", "input") and a.requires_grad for a in written)
        # A write into a slice or select of a base whose other views are
        # not read again (Swin V2's qkv_bias[l:2l].zero_(), a buffer filled
        # by out[:, :d] = x): the base is written back with slice_scatter or
        # select_scatter after it, so the base's readers see the write.
        # A view of a view (out[i][j:k] = x; pad_packed_sequence's copies
        # into out[:n][t]) is written back level by level, to the root.
        chain, view = [], written[0] if len(written) == 1 else None
        while view is not None and id(view) in trace.views:
            chain.append(trace.views[id(view)])
            view = chain[-1][0]
        stale = sharers - {id(base) for base, _, _ in chain}  # read later: refused
        inputs = [v for v in tree_flatten((vargs, vkwargs))[0] if isinstance(v, Value)]
        name = func._schema.name.split("::")[-1].rstrip("_")
        if name in _SHAPE_ONLY:
            kind = "const"
        elif torch.Tag.nondeterministic_seeded in func.tags or any(v.kind == "random" for v in inputs):
            kind = "live" if any(v.live for v in inputs) else "random"
        else:
            kind = "live" if any(v.live for v in inputs) else "const"
        out = _call_shapes_only(trace, func, args, kwargs, kind == "const") if trace.shapes_only else func(*args, **kwargs)
        path, label = trace.stack[-1], name
        if kind == "const" and name in _VIEWS and inputs and inputs[0].kind == "const":
            # A view of a constant keeps the name of what it views (RoPE's cos
            # unsqueezed in attention stays the rotary embedding's cos).
            path, label = inputs[0].path, inputs[0].label
        outs = []
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                outs.append(None)
                continue
            k = kind
            if kind == "live" and not (t.is_floating_point() or t.is_complex()):
                trace.decisions.append((path, name))
                if trace.fixed_decisions:
                    k = "const"
            snapshot = trace.contents(t) if k == "const" else t.detach() if k == "random" else None
            outs.append(trace.add(t, k, snapshot, path=path, label=label))
        note = None
        if name == "_safe_softmax" and kind == "live":
            # PyTorch's safe softmax gives 0 on a row that is -inf everywhere:
            # remat's softmax gives nan there. Noted for the op table.
            note = (trace.assume(path, name, "no row of the scores is masked everywhere") if trace.shapes_only
                    else bool((out == 0).all(-1).any()))
        if name in ("max", "min") and kind == "live" and isinstance(out, tuple):
            # torch.max(x, dim) gives the gradient to the element its index
            # names, remat's amax splits it among ties: whether a row of this
            # input has several elements equal to its extremum.
            note = (trace.assume(path, name, "no row holds its extremum twice") if trace.shapes_only
                    else _has_ties(args[0], out[0], args[1] if len(args) > 1 else kwargs["dim"],
                                   args[2] if len(args) > 2 else kwargs.get("keepdim", False)))
        if name == "as_strided" and kind == "live":
            note = _strided_index(*args, **kwargs)
        if kind == "live" and not isinstance(out, (torch.Tensor, list, tuple)):
            note = "python"  # a tensor's value read by Python (.item(), if x > 0)
        if aliased and (kind == "live" or any(v.kind in ("param", "buffer", "input") for v in inputs)):
            note = "aliased"
        elif stale and (kind == "live" or any(v.kind in ("param", "buffer", "input") for v in inputs)):
            note = ("aliased", frozenset(stale))
        trace.events.append(Call(func, vargs, vkwargs, outs, path, note))
        if name in ("slice", "select") and isinstance(out, torch.Tensor) and args[0].layout == torch.strided:
            rest = list(args[1:]) + [kwargs[k] for k in ("dim", "start", "end", "step", "index") if k in kwargs]
            trace.views[id(out)] = (args[0], "slice_scatter" if name == "slice" else "select_scatter", rest)
        if kind == "const" and written:
            # A constant written in place (a mask built by m[1:3] = 1): every
            # constant that shares its storage (the base of the view written,
            # other views of it) gets a new Value with its contents now, so
            # that a later read sees the write, not the contents at creation.
            for sid in sharers:
                v = trace.values.get(sid)
                if v is not None and v.kind == "const":
                    t = trace.tensors[sid]
                    trace.add(t, "const", trace.contents(t), path=v.path, label=v.label)
        if chain and outs and outs[0] is not None and outs[0].kind == "live":
            part = outs[0]
            for base, op_name, rest in chain:
                old_base = trace.value(base)
                new_base = trace.add(base, "live", None, path=path, label=op_name)
                trace.events.append(Call(getattr(torch.ops.aten, op_name).default, (old_base, part, *rest), {},
                                         [new_base], path))
                part = new_base
        return out


class _NoValue(Exception):
    pass


def _call_shapes_only(trace, func, args, kwargs, const):
    """func on the meta device (its tensor arguments moved there: integer
    inputs are real); a constant's op also on the CPU, from its arguments'
    contents where all are known (trace.shadow), which become its outputs'
    shadows. An op that returns no tensor (.item(), `if mask.all()`)
    returns the CPU's answer: Python reads a known constant."""
    def cpu(a):
        if isinstance(a, torch.Tensor):
            if not a.is_meta:
                return a
            if id(a) not in trace.shadow:
                raise _NoValue()
            return trace.shadow[id(a)]
        if isinstance(a, torch.device) and a.type == "meta":
            return torch.device("cpu")
        return a
    real = None
    if const:
        try:
            real = func(*tree_map(cpu, args), **tree_map(cpu, kwargs))
        except _NoValue:
            real = None
        if real is not None and not any(isinstance(r, torch.Tensor) for r in tree_flatten(real)[0]):
            return real
    meta = (lambda a: a.to("meta") if isinstance(a, torch.Tensor) and not a.is_meta else a)
    out = func(*tree_map(meta, args), **tree_map(meta, kwargs))
    if real is not None:
        for t, r in zip(tree_flatten(out)[0], tree_flatten(real)[0]):
            if isinstance(t, torch.Tensor) and isinstance(r, torch.Tensor):
                trace.shadow[id(t)] = r
    return out


class _CpuAttention(TorchFunctionMode):
    """Shapes only: scaled_dot_product_attention picks its kernel by
    device, its math form on the meta device and on the CPU (where its
    choice is the fused kernel) _scaled_dot_product_flash_attention_for_cpu,
    which the op table maps whole. Here it takes the CPU's choice, asked of
    stand-ins of the same types that are never written (the choice reads no
    values), and calls that kernel as the CPU's dispatch does (a boolean
    mask made additive first), so that the program is a CPU export's."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.scaled_dot_product_attention:
            return func(*args, **kwargs)
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        given = dict(zip(names, args), **kwargs)

        def cpu(t):
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype) if isinstance(t, torch.Tensor) else t
        with _disable_current_modes():  # the trace's: it would make them meta tensors
            choice = torch._fused_sdp_choice(*[cpu(a) for a in args], **{k: cpu(v) for k, v in kwargs.items()})
        if choice != SDPBackend.FLASH_ATTENTION.value:
            return func(*args, **kwargs)
        q, mask = given["query"], given.get("attn_mask")
        if mask is not None and mask.dtype == torch.bool:
            mask = torch.where(mask.logical_not(), float("-inf"), 0.0).to(q.dtype)
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, given["key"], given["value"], given.get("dropout_p", 0.0), given.get("is_causal", False),
            attn_mask=mask, scale=given.get("scale"))[0]


class _Hooks:
    """The global module hooks that keep trace.stack, the module path now."""

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.handles = [module_hooks.register_module_forward_pre_hook(self.trace.module_pre),
                        module_hooks.register_module_forward_hook(self.trace.module_post, always_call=True)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()


def run_traced(root, inputs, fn, regions, mapped=None, fixed_decisions=False):
    """Runs fn() (the model's forward and loss) under the trace; returns
    (trace, fn's result). inputs: (name, tensor) of the example inputs.
    regions: a torch_export_regions.Regions, entered around the run.
    mapped: the op keys (op_key) the lowering maps, or None; an op on live
    values outside it that PyTorch can decompose (torch._decomp) is traced
    as its decomposition. The model's buffers and PyTorch's random state are
    as they were after it. fixed_decisions: Trace's."""
    trace = Trace(root, inputs, fixed_decisions)
    buffers = [(b, b.detach().clone()) for b in root.buffers()]
    try:
        with torch.random.fork_rng(), regions.recording(trace), _Hooks(trace), _Dispatch(trace, mapped), \
                (_CpuAttention() if trace.shapes_only else contextlib.nullcontext()):
            result = fn()
    except ExportError:
        raise
    except Exception as e:
        if trace.shapes_only and "meta" in str(e):
            raise ExportError("%s: the model's forward read the contents of a tensor computed from its parameters "
                              "or buffers (%s: %s), and a shapes-only export has none (they are on the meta "
                              "device); export with real tensors" % (trace.stack[-1] or "<root>", type(e).__name__,
                                                                    e)) from e
        raise ExportError("%s: the model's forward raised %s: %s (under the exporter's trace)"
                          % (trace.stack[-1] or "<root>", type(e).__name__, e)) from e
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
    return trace, result
