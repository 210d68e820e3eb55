"""tools/torch_export.py's lowering: the trace's events, in order, as remat
statements. Each ATen op with a live input goes through the op table
(torch_export_ops.py); ops on constants only are computed already (their
outputs are constants); a checkpoint region's ops go into a body of its own.

What an op cannot map becomes an error value that propagates to what reads
it: the ExportError names every unsupported op whose result reaches the
loss, one line each, and none that does not (dead code is dropped, as the
statements no root needs are)."""

import torch
from torch.utils._pytree import tree_flatten, tree_map

from torch_export_errors import _Unsupported, ExportError
from torch_export_program import Body, Stmt, _type
from torch_export_regions import RegionBegin, RegionEnd
from torch_export_trace import Value, _join


class Live:
    """A value of the program: its id in the body that made it."""

    def __init__(self, body, vid, shape, origin=None):
        self.body, self.id, self.shape, self.origin = body, vid, tuple(shape), origin
        self.errs = set()  # the unsupported uses it depends on (their lines)


class Src:
    """A parameter or float example input: a program input, imported where read."""

    def __init__(self, value):
        self.value, self.shape = value, value.shape


class Const:
    """A constant (computed at export, a buffer, an integer input)."""

    def __init__(self, value):
        self.value, self.shape, self.tensor = value, value.shape, value.tensor


class Random:
    """Dropout's noise: bernoulli(keep), divided by keep when scaled."""

    def __init__(self, keep, scaled, shape):
        self.keep, self.scaled, self.shape = keep, scaled, tuple(shape)


# The dropout seed: one i32[] input of the program.
_SEED = torch.tensor(0, dtype=torch.int32)


class Lowering:
    def __init__(self, trace, inputs, example_names, table):
        self.trace, self.inputs, self.table = trace, inputs, table
        self.example_names = example_names  # (name, tensor) of forward's integer inputs
        self.env, self.count, self.hard, self.dropout_keys = {}, 0, [], 0
        self.order = []  # every unsupported use's line, in the order met
        self.top = Body(None)
        self.transposed = self._transposed_only()
        self._judge_aliased_writes()

    def fresh(self):
        self.count += 1
        return "v%d" % self.count

    def _transposed_only(self):
        """Indices of parameters read only through .t() (nn.Linear's weight):
        written transposed, as "<path>.T", so that no transpose op is run."""
        t_uses, other = set(), set()
        for ev in self.trace.events:
            if not hasattr(ev, "func"):
                continue
            if ev.name == "detach.default":
                continue
            ins = [v for v in tree_flatten((ev.args, ev.kwargs))[0] if isinstance(v, Value) and v.kind == "param"]
            for i, v in enumerate(ins):
                is_t = i == 0 and len(v.shape) == 2 and (ev.name == "t.default" or (
                    ev.name == "transpose.int" and sorted(a % 2 for a in ev.args[1:3]) == [0, 1]))
                (t_uses if is_t else other).add(v.index)
        return t_uses - other

    def _judge_aliased_writes(self):
        """An in-place write whose storage other tensors share (the trace's
        note ("aliased", their ids)) is refused ("aliased") when one of those
        tensors is read after it: the trace holds its old contents. Else the
        write is a plain op."""
        events = [ev for ev in self.trace.events if hasattr(ev, "func")]
        for i, ev in enumerate(events):
            if not (isinstance(ev.note, tuple) and ev.note[0] == "aliased"):
                continue
            others = ev.note[1]
            read_later = any(getattr(v, "tensor_id", None) in others
                             for later in events[i + 1:]
                             for v in tree_flatten((later.args, later.kwargs))[0] if isinstance(v, Value))
            ev.note = "aliased" if read_later else None

    def entry(self, v):
        e = self.env.get(v.index)
        if e is None:
            e = Src(v) if v.live else Const(v)
            self.env[v.index] = e
        return e

    # Reading values across bodies.
    def ref(self, body, x):
        """The id of Live x in `body`: imported from an enclosing body, or
        read from a closed region nested in one (the region's value)."""
        if x.body is body:
            return x.id
        ancestors = list(body.ancestors())
        if x.body in ancestors:
            key = ("live", x.id)
            if key not in body.imports:
                outer = self.ref(body.parent, x)
                local = self.fresh()
                body.params.append((local, outer, _type(x.shape)))
                body.imports[key] = local
            return body.imports[key]
        region = x.body
        while region is not None and region.parent not in ancestors:
            region = region.parent
        if region is None:
            raise _Unsupported("a value made in another checkpoint region is read here")
        inner = self.ref(region, x)
        owner = region.parent
        key = ("region", id(region), inner)
        if key not in owner.imports:
            proj = Stmt(self.fresh(), None, [], x.shape, "", region.site, region=region, inner=inner)
            owner.stmts.insert(owner.stmts.index(region.stmt) + 1, proj)
            owner.imports[key] = Live(owner, proj.id, x.shape)
        return self.ref(body, owner.imports[key])

    def source(self, body, key, name, tensor, kind, last=False):
        """The id of program input `key` in `body` (a parameter of every
        region body between)."""
        if body.parent is None:
            return self.inputs.get(key, name, tensor, kind, last)
        if key not in body.imports:
            outer = self.source(body.parent, key, name, tensor, kind, last)
            body.params.append((outer, outer, _type(tensor.shape, tensor.dtype)))
            body.imports[key] = outer
        return body.imports[key]

    def const_name(self, v, hint):
        """A constant's input name: an integer example input's own name when
        it holds that input's elements (targets.view(-1); shapes only, where
        no elements are known: when its type and size are that input's),
        else the module path that made it and what it is."""
        for name, t in self.example_names:
            if t.dtype == v.dtype and t.numel() == v.tensor.numel() and (
                    t.is_meta or torch.equal(t.reshape(-1), v.tensor.reshape(-1))):
                if name not in self.inputs.owner:
                    return name
        return _join(v.path, hint or v.label or "const")

    def import_const(self, body, c, hint=None):
        v = c.value
        if v.kind == "buffer":
            return self.source(body, ("t", v.index, False), v.name, v.tensor, "buffer")
        if v.kind == "input":
            return self.source(body, ("t", v.index, False), v.name, v.tensor, "argument", last=True)
        t = v.tensor
        if t.is_meta and id(t) in self.trace.shadow:  # shapes only: its contents, computed beside the trace
            t = self.trace.shadow[id(t)]
        if t.dtype == torch.bool:
            t = t.to(torch.int32)
        elif t.dtype.is_floating_point and t.dtype != torch.float32:
            raise _Unsupported("a %s constant (remat's programs are f32)" % t.dtype)
        # Equal constants are one input; a shapes-only export's have no
        # contents, and each is its own.
        key = ("c", str(t.dtype), tuple(t.shape), ("meta", id(v)) if t.is_meta else t.contiguous().numpy().tobytes())
        name = self.const_name(v, hint)
        return self.source(body, key, name, t, "constant")

    def import_src(self, body, s, transposed=False):
        v = s.value
        tensor = v.tensor.t() if transposed else v.tensor
        kind = "parameter" if v.kind == "param" else "argument"
        return self.source(body, ("t", v.index, transposed), v.name + (".T" if transposed else ""), tensor, kind,
                           last=v.kind == "input")

    # The walk.
    def run(self, result):
        body = self.top
        for ev in self.trace.events:
            if isinstance(ev, RegionBegin):
                region = Body(body, ev.name, ev.path, ev)
                region.stmt = Stmt(self.fresh(), "@region", [], None, "", ev.path, body=region, region=region)
                body.stmts.append(region.stmt)
                if ev.problem:
                    self.hard.append("%s (checkpoint): %s" % (ev.path or "<root>", ev.problem))
                body = region
            elif isinstance(ev, RegionEnd):
                if body.begin is None or body.begin.index != ev.index:
                    raise ExportError("checkpoint regions are not nested (region %d ends inside another)" % ev.index)
                body = body.parent
            else:
                self.call(body, ev)
        out = self.entry(result)
        if getattr(out, "errs", None):
            return [line for line in self.order if line in out.errs]
        if not isinstance(out, (Live, Src)):
            raise ExportError("the loss does not depend on any parameter or float input of the model")
        self.top.out = self.ref(self.top, out) if isinstance(out, Live) else self.import_src(self.top, out)
        return None

    def note(self, line):
        if line not in self.order:
            self.order.append(line)
        return line

    def call(self, body, c):
        ins = [v for v in tree_flatten((c.args, c.kwargs))[0] if isinstance(v, Value)]
        entries = [self.entry(v) for v in ins]
        outs = [o for o in c.outs if o is not None]
        if c.note == "python" and any(v.live for v in ins):
            self.hard.append("%s (aten.%s): Python reads a value of a tensor computed from the model's inputs "
                             "(.item(), `if x.sum() > 0`): the program would hold one branch for every input"
                             % (c.path or "<root>", c.name))
            return
        if c.note == "aliased":
            self.hard.append("%s (aten.%s): an in-place write into a tensor that shares its storage with another "
                             "(a view, .detach(), .data): remat's values are never aliased"
                             % (c.path or "<root>", c.name))
        if all(o.kind == "const" for o in outs):
            for o in outs:
                self.env[o.index] = Const(o)
            return
        inherited = set()
        for e in entries:
            inherited |= getattr(e, "errs", set())
        ctx = Ctx(self, body, c)
        where = "%s (aten.%s): " % (c.path or "<root>", c.name)
        try:
            fn = self.table.get(c.name)
            if fn is None:
                raise _Unsupported("no mapping to remat's ops")
            args = tree_map(lambda v: self.entry(v) if isinstance(v, Value) else v, c.args)
            kwargs = tree_map(lambda v: self.entry(v) if isinstance(v, Value) else v, c.kwargs)
            result = fn(ctx, *args, **kwargs)
        except _Unsupported as e:
            result, inherited = None, inherited | {self.note(where + e.what)}
        except ExportError:
            raise
        except Exception as e:  # the exporter's own fault: named, never raw
            result = None
            inherited = inherited | {self.note(where + "the exporter failed on it (%s: %s)" % (type(e).__name__, e))}
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        for i, o in enumerate(c.outs):
            if o is None:
                continue
            if o.kind == "const":  # a decision fixed at export (topk's indices): its contents as traced
                self.env[o.index] = Const(o)
                continue
            r = results[i] if i < len(results) else None
            errs = set(inherited)
            if result is not None and r is None:
                errs.add(self.note(where + "its output %d is not mapped" % i))
            elif o.dtype.is_floating_point and o.dtype != torch.float32 and isinstance(r, Live):
                errs.add(self.note(where + "computes in %s (remat's programs are f32)" % o.dtype))
            if errs:
                # A stand-in, so that the walk goes on and one error names
                # every unsupported op that reaches the loss.
                r = r if isinstance(r, Live) and r not in entries else Live(body, self.fresh(), o.shape)
                r.errs = errs
            self.env[o.index] = r


class Ctx:
    """What an op table entry sees: its call, its body, and the lowering's
    services (torch_export_ops.py's entries are fn(ctx, *args, **kwargs),
    their tensors as Live, Src, Const or Random)."""

    def __init__(self, lowering, body, call):
        self.lowering, self.body, self.call = lowering, body, call
        self.path = call.path

    @staticmethod
    def live(x):
        return isinstance(x, (Live, Src))

    @staticmethod
    def fail(what):
        raise _Unsupported(what)

    def id(self, x, hint=None):
        """x's id in this body: a live value, a parameter or float input
        (imported), or a constant (an input of the program)."""
        if isinstance(x, Live):
            return self.lowering.ref(self.body, x)
        if isinstance(x, Src):
            return self.lowering.import_src(self.body, x)
        if isinstance(x, Const):
            return self.lowering.import_const(self.body, x, hint)
        if isinstance(x, Random):
            self.fail("random values (torch.rand, bernoulli) other than dropout's mask")
        self.fail("a %s where a tensor is expected" % type(x).__name__)

    def constant(self, tensor, hint):
        """A tensor made here whose contents do not depend on the model's
        values (x.zero_() of a live x) as a constant entry."""
        return Const(Value(-1, "const", tensor, path=self.path, label=hint))

    def const_input(self, tensor, hint):
        """A tensor made here (an expanded mask) as an input of the program."""
        v = Value(-1, "const", tensor, path=self.path, label=hint)
        return self.lowering.import_const(self.body, Const(v), hint)

    def transposed_param(self, x):
        """The id of parameter x written transposed, when every use of it is
        a transpose (nn.Linear's weight), else None."""
        if isinstance(x, Src) and x.value.kind == "param" and x.value.index in self.lowering.transposed:
            return self.lowering.import_src(self.body, x, transposed=True)
        return None

    def out_shape(self, i=0):
        return self.call.outs[i].shape

    def emit(self, op, inputs, shape, attrs="", root=False, origin=None):
        """Appends `%v: f32[shape] = op(inputs) attrs`; returns its Live."""
        sid = self.lowering.fresh()
        self.body.stmts.append(Stmt(sid, op, list(inputs), tuple(shape) if shape is not None else None, attrs,
                                    self.path, root=root))
        return Live(self.body, sid, shape if shape is not None else (), origin)

    def dropout(self, x, p, shape):
        """remat's dropout on the program's dropout_seed, one key per site in
        trace order: the contract's mask, not PyTorch's; the same mask on
        every recomputation."""
        if not 0 < p < 1:
            self.fail("dropout with p=%r (remat's takes p in (0, 1))" % p)
        seed = self.lowering.source(self.body, ("seed",), "dropout_seed", _SEED, "buffer")
        self.lowering.dropout_keys += 1
        return self.emit("dropout", [x, seed], shape, " scalar=%r ints=[%d]" % (float(p), self.lowering.dropout_keys))
