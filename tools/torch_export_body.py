"""tools/torch_export.py's conversion of an fx graph into a program body: the
values a node can have (a program id, a Python value from shapes, a tensor
folded at export, split's pieces) and what every op's mapping uses (paths,
shapes, emitting a statement, refusing a node)."""

import torch
import torch.fx

from torch_export_errors import _UNSUPPORTED, _Unsupported
from torch_export_program import _join, _quote, _tensor_names, _type, _unwrapped
from torch_export_trace import _value

# Folded constants that are not buffers, shared by value: one input for the
# causal mask every attention layer uses.
_SHARED = []


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


class _Body:
    """Converts the fx GraphModule `gm`, traced from the module `traced` (at
    path `prefix` of `root`), into statements appended to `lines`; the op
    mappings (torch_export_modules.py, torch_export_calls.py) and the walk
    over the graph (torch_export_convert.py) build on this."""

    def __init__(self, gm, traced, root, prefix, arg_ids, writer, lines, indent, params):
        self.gm, self.traced, self.root, self.prefix = gm, traced, root, prefix
        self.writer, self.lines, self.indent, self.params = writer, lines, indent, params
        self.current = [None]  # the node being converted: a folded value read by it is named after it
        self.env = _Env(self.materialize)
        self.placeholders = iter(arg_ids)
        self.paths = {id(m): _unwrapped(n) for n, m in root.named_modules()}
        self.names = _tensor_names(root)
        self.mods = dict(gm.named_modules())

    def materialize(self, f, hint=None):
        if f.buffer:
            return self.params.get(f.name, f.value, False)
        value = f.value
        for other in _SHARED:
            if other.shape == value.shape and other.dtype == value.dtype and torch.equal(other, value):
                value = other
                break
        else:
            _SHARED.append(value)
        name = f.name or _join(self.module_path(self.current[0]) if self.current[0] is not None else self.prefix, hint or "constant")
        return self.params.get(name, value, False)

    def tensor_path(self, tensor, owner, attr, node):
        path = self.names.get(id(tensor))
        if path is not None:
            return path
        owner_path = self.paths.get(id(owner))
        if owner_path is None:
            self.fail(node, "a tensor attribute %r of a module that is not a submodule of the exported model" % attr)
        return _join(owner_path, attr)

    def module_path(self, node):
        """The full path of the module whose code made `node` (the innermost
        module fx was in; for a module call, the module itself)."""
        if node.op == "call_module":
            return self.paths.get(id(self.mods[node.target]), _join(self.prefix, node.target))
        stack = node.meta.get("nn_module_stack") or {}
        for key in reversed(list(stack)):
            try:
                m = self.traced.get_submodule(key)
            except AttributeError:
                continue
            if id(m) in self.paths:
                return self.paths[id(m)]
        return self.prefix

    def where(self, node):
        if node.op == "call_module":
            return self.module_path(node) or "<root>"
        return "%s (%s)" % (self.module_path(node) or "<root>", node.name)

    def param(self, module, attr, node, transposed=False):
        tensor = getattr(module, attr)
        return self.params.get(self.tensor_path(tensor, module, attr, node), tensor, transposed)

    def shape(self, node):
        v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        return tuple(v.shape) if isinstance(v, torch.Tensor) else None

    def dtype(self, node):
        v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        return v.dtype if isinstance(v, torch.Tensor) else torch.float32

    def emit(self, op, inputs, node, attrs="", typed=True, out_shape=None):
        if any(not isinstance(i, str) for i in inputs):
            self.fail(node, "%s of a Python value computed from shapes (a tensor is expected)" % op)
        out = self.writer.fresh()
        s = out_shape if out_shape is not None else self.shape(node) if node is not None and typed else None
        t = ": %s" % _type(s) if s is not None else ""
        site = " @ %s" % _quote(self.where(node)) if node is not None else ""
        self.lines.append("%s%%%s%s = %s(%s)%s%s" % (self.indent, out, t, op, ", ".join("%" + i for i in inputs), attrs, site))
        return out

    def fail(self, node, what):
        raise _Unsupported("%s: %s%s" % (self.where(node), what, _UNSUPPORTED))

    def tensor_arg(self, node, a):
        if not isinstance(a, torch.fx.Node):
            self.fail(node, "%s with a non-tensor argument %r" % (node.target, a))
        return self.env[a]

    def concrete(self, a):
        """a, or the Python value of a node the traced code computed from shapes."""
        if isinstance(a, torch.fx.Node) and isinstance(self.env.get(a), _Const):
            return self.env[a].value
        return a

    def reshaped(self, x, dims, node):
        """x (a program id) reshaped to dims, or x when it has them already."""
        return self.emit("reshape", [x], node, " ints=[%s]" % ",".join(str(d) for d in dims), out_shape=tuple(dims))

    def foldable(self, node):
        """Whether every tensor `node` reads is folded (buffers, constants)
        and at least one is: then its value is the example run's, fixed."""
        found = []
        torch.fx.node.map_arg((node.args, node.kwargs), found.append)
        vals = [self.env.raw(a) for a in found]
        return any(isinstance(v, _Folded) for v in vals) and all(isinstance(v, (_Folded, _Const)) for v in vals)

    def fold(self, node):
        v = _value(node, self.root)
        if not isinstance(v, torch.Tensor):
            return _Const(v)
        found = []
        torch.fx.node.map_arg((node.args, node.kwargs), found.append)
        origin = next((self.env.raw(a).name for a in found if isinstance(self.env.raw(a), _Folded) and self.env.raw(a).name), None)
        op = getattr(node.target, "__name__", node.target)
        return _Folded(v, _join(origin, str(op).strip("_")) if origin else None)
