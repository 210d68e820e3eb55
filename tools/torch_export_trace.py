"""tools/torch_export.py's tracing: torch.fx's graph of a module, every node
run on the example inputs as it is recorded, so that shapes are concrete."""

import torch
import torch.fx
import torch.nn as nn

from torch_export_errors import ExportError
from torch_export_program import _join


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
