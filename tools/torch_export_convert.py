"""tools/torch_export.py's walk over an fx graph: every node converted (a
parameter or buffer read, a module call, a function or method call, a
checkpoint region as a body of its own), the uses remat cannot take
recorded and the walk gone on."""

import torch
import torch.fx
import torch.nn as nn

from torch_export_body import _Body, _Folded
from torch_export_calls import _CallOps
from torch_export_errors import _ERRORS, ExportError, _Unsupported
from torch_export_modules import _ModuleOps
from torch_export_program import _join, _Params, _quote, _type
from torch_export_regions import _REGIONS, _checkpoint_marker, _FunctionRegion, _Patched
from torch_export_trace import _constant, _trace, _value


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
    return _Converter(gm, traced, root, prefix, arg_ids, writer, lines, indent, params).run()


class _Converter(_CallOps, _ModuleOps, _Body):
    """A _Body's walk over its graph."""

    def run(self):
        for node in self.gm.graph.nodes:
            self.current[0] = node
            try:
                if node.op == "placeholder":
                    self.env[node] = next(self.placeholders)
                elif node.op == "get_attr":
                    self.env[node] = self.get_attr(node)
                elif node.op == "output":
                    return self.env[node.args[0]]
                elif node.op == "call_function" and node.target is _constant:
                    self.env[node] = _Folded(_value(node, self.root), None)
                elif node.op in ("call_function", "call_method") and node.target is not _checkpoint_marker \
                        and self.foldable(node):
                    self.env[node] = self.fold(node)
                elif node.op == "call_module":
                    self.env[node] = self.module_op(node)
                elif node.op == "call_function" and node.target is _checkpoint_marker:
                    self.env[node] = self.checkpoint_region(node)
                elif node.op in ("call_function", "call_method"):
                    self.env[node] = self.function_op(node)
                else:
                    self.fail(node, node.op)
            except _Unsupported as e:
                # Recorded, and the conversion goes on, so that one run names
                # everything the model uses that remat cannot take.
                _ERRORS.append(str(e))
                self.env[node] = self.writer.fresh()
        raise ExportError("%s: the traced graph has no output" % (self.prefix or "<root>"))

    def get_attr(self, node):
        owner, tensor = _resolve(self.traced, node.target, self.where(node))
        if not isinstance(tensor, torch.Tensor):
            self.fail(node, "get_attr %r of type %s (only tensors)" % (node.target, type(tensor).__name__))
        attr = node.target.rpartition(".")[2]
        if isinstance(tensor, nn.Parameter):
            return self.param(owner, attr, node)
        else:  # a buffer: folded where it is only read through constants
            return _Folded(tensor, self.tensor_path(tensor, owner, attr, node), buffer=True)

    def checkpoint_region(self, node):
        """A checkpoint marker as a checkpoint statement whose body is the
        region, traced and converted on its own."""
        region = _REGIONS[node.args[0]]
        inner_args = list(node.args[1:])
        if not all(isinstance(a, torch.fx.Node) for a in inner_args):
            self.fail(node, "checkpoint with a non-tensor argument %r (remat's regions take tensors)"
                      % next(a for a in inner_args if not isinstance(a, torch.fx.Node)))
        path = self.paths.get(id(region))
        # A region checkpoint_sequential made is a new nn.Sequential of
        # the root's modules: named by its first module's path.
        if isinstance(region, _FunctionRegion):
            # A module's path, or where it was called and the function's name.
            sub_prefix = self.paths.get(id(region._function)) or _join(self.module_path(node), region.label.strip("<>"))
        else:
            sub_prefix = path if path is not None else self.paths.get(id(next(region.children(), None)), self.prefix)
        with _Patched(region):
            graph = _trace(region, sub_prefix, [_value(a, self.root) for a in inner_args])
        sub = torch.fx.GraphModule(region, graph)
        body_lines, body_params = [], _Params()
        body_ids = ["a%d" % i for i in range(len(inner_args))]
        out = _convert(sub, region, self.root, sub_prefix, body_ids, self.writer,
                       body_lines, self.indent + "  ", body_params)
        outer_inputs = [self.env[a] for a in inner_args]
        param_decls = ["%s: %s" % (i, _type(self.shape(a), self.dtype(a))) for i, a in zip(body_ids, inner_args)]
        for bid, path, t, transposed in body_params.items():
            outer_inputs.append(self.params.get(path[:-2] if transposed else path, t, transposed))
            param_decls.append("%s: %s" % (bid, _type(t.t().shape if transposed else t.shape, t.dtype)))
        y = self.writer.fresh()
        self.lines.append("%s%%%s: %s = checkpoint(%s) name=%s policy=\"nothing_saveable\" @ %s {"
                          % (self.indent, y, _type(self.shape(node)), ", ".join("%" + i for i in outer_inputs),
                             _quote(sub_prefix or "region"), _quote(sub_prefix or "<root>")))
        self.lines.append("%s  body(%s)" % (self.indent, ", ".join(param_decls)))
        self.lines.extend(body_lines)
        self.lines.append("%s  return %%%s" % (self.indent, out))
        self.lines.append("%s}" % self.indent)
        return y
