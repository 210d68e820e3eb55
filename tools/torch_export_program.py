"""tools/torch_export.py's program: its inputs (parameters, buffers, folded
constants, example inputs, the dropout seed; each named once), its bodies and
statements, dead statements removed, and program.txt and the inputs' .npy
files written."""

import os

import numpy as np
import torch

from torch_export_errors import ExportError

_INTEGER = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8, torch.bool)


def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _type(shape, dtype=torch.float32):
    """f32[...], or i32[...] for an integer tensor (ids, targets, masks)."""
    return "%s[%s]" % ("i32" if dtype in _INTEGER else "f32", ",".join(str(d) for d in shape))


def _ident(name):
    return "".join(c if c.isalnum() or c in "_." else "_" for c in name)


class Inputs:
    """The program's inputs, by key (a tensor's identity and whether it is
    read transposed; a constant's contents), each once, named on first use."""

    def __init__(self):
        self.by_key, self.owner = {}, {}

    def get(self, key, name, tensor, kind, last=False):
        """The id of the input `key`, made on first use: `tensor` its contents,
        kind "parameter" (differentiated by default), "buffer", "constant" (a
        new name is found when taken), "argument" (forward's; last: written
        after the others)."""
        if key in self.by_key:
            return self.by_key[key][0]
        pid = _ident(name)
        if kind == "constant":
            base, n = pid, 1
            while pid in self.owner:
                pid, n = "%s_%d" % (base, n), n + 1
        elif pid in self.owner:
            raise ExportError("two inputs of the program would both be named %r: %s %r and %s %r; rename one"
                              % (pid, self.owner[pid][0], self.owner[pid][1], kind, name))
        wide = tensor.to(torch.int64) if tensor.dtype in _INTEGER else None
        if wide is not None and wide.numel() and not wide.is_meta and (
                int(wide.min()) < -2 ** 31 or int(wide.max()) >= 2 ** 31):
            raise ExportError("input %r: integer values outside int32 (remat's integer inputs are i32)" % pid)
        self.owner[pid] = (kind, name)
        self.by_key[key] = (pid, tensor, kind, last)
        return pid

    def declared(self, used):
        """(id, tensor, data) of the inputs in `used`, forward's last."""
        items = [v for v in self.by_key.values() if v[0] in used]
        items = [v for v in items if not v[3]] + [v for v in items if v[3]]
        return [(pid, t, kind != "parameter") for pid, t, kind, _ in items]


class Stmt:
    """`%id: TYPE = op(%inputs) attrs @ "site"`; a checkpoint's body is a
    Body. A region's value read after it is a projection (op None) until the
    region's statement is made (Body.prune)."""

    def __init__(self, sid, op, inputs, shape, attrs, site, body=None, region=None, inner=None, root=False):
        self.id, self.op, self.inputs, self.shape, self.attrs, self.site = sid, op, inputs, shape, attrs, site
        self.body, self.region, self.inner, self.root = body, region, inner, root


class Body:
    """A program body: the top level, or a checkpoint region's. params:
    (local id, the id it has in the parent, type) of what it reads from
    outside; stmts in order."""

    def __init__(self, parent, name=None, site=None, begin=None):
        self.parent, self.name, self.site, self.begin = parent, name, site, begin
        self.params, self.stmts, self.imports = [], [], {}
        self.out = None  # the id the body returns
        self.kept = False  # the region became a checkpoint statement

    def ancestors(self):
        b = self
        while b is not None:
            yield b
            b = b.parent

    def prune(self, roots, lost, fresh):
        """Removes the statements no root needs (a backward walk: every use
        comes after its definition); a region whose value is read becomes its
        checkpoint statement, or an entry in `lost` when none is. A region
        several of whose values are read after it (T5's first block: its
        hidden states and the position bias the later blocks reuse) returns
        them packed, as remat's checkpoint returns one value: each flattened
        and joined by cat at the end of its body, sliced and reshaped back
        after it (copies: values and gradients are exact). fresh() makes
        new ids. Returns the ids of params used."""
        need = set(roots) | {s.id for s in self.stmts if s.root}
        kept, reads = [], {}
        for s in reversed(self.stmts):
            if s.op is None:  # a read of a region's value
                if s.id in need:
                    reads.setdefault(id(s.region), (s.region, []))[1].append(s)
                continue
            if s.op == "@region":
                region, projections = reads.get(id(s.region), (s.region, []))
                if not projections:
                    lost.append((region.begin, "its output does not reach the loss"))
                    continue
                # One read per (region, value): Body.read caches it.
                projections.sort(key=lambda p: region.order(p.inner))
                if len(projections) == 1:
                    region.out, s.id, s.shape = projections[0].inner, projections[0].id, projections[0].shape
                else:
                    region.out, s.id, unpack = region.pack(projections, fresh)
                    s.shape = (sum(_count(p.shape) for p in projections),)
                    for u in reversed(unpack):
                        need.update(u.inputs)
                        kept.append(u)
                used = region.prune([region.out], lost, fresh)
                region.params = [p for p in region.params if p[0] in used]
                region.kept = True
                s.op, s.inputs = "checkpoint", [p[1] for p in region.params]
            elif s.id not in need and not s.root:
                continue
            need.update(s.inputs)
            kept.append(s)
        self.stmts = kept[::-1]
        return need

    def order(self, sid):
        """Where statement `sid` stands in this body (its values in program
        order)."""
        for i, s in enumerate(self.stmts):
            if s.id == sid:
                return i
        return len(self.stmts)

    def pack(self, projections, fresh):
        """Appends to this region's body the flattened values the
        projections read, joined two at a time by cat; returns the packed
        id, the id of the checkpoint's (packed) value outside, and the
        statements after the checkpoint that slice and reshape each value
        back under its projection's id."""
        joined, total, site = None, 0, self.site
        for p in projections:
            n = _count(p.shape)
            flat = p.inner
            if tuple(p.shape) != (n,):
                flat = fresh()
                self.stmts.append(Stmt(flat, "reshape", [p.inner], (n,), " ints=[%d]" % n, site))
            if joined is None:
                joined = flat
            else:
                cid = fresh()
                self.stmts.append(Stmt(cid, "cat", [joined, flat], (total + n,), " ints=[0]", site))
                joined = cid
            total += n
        outside, unpack, start = fresh(), [], 0
        for p in projections:
            n = _count(p.shape)
            piece = fresh() if tuple(p.shape) != (n,) else p.id
            unpack.append(Stmt(piece, "slice", [outside], (n,), " ints=[0,%d,%d]" % (start, n), site))
            if piece != p.id:
                dims = ",".join(str(d) for d in p.shape)
                unpack.append(Stmt(p.id, "reshape", [piece], tuple(p.shape), " ints=[%s]" % dims, site))
            start += n
        return joined, outside, unpack


def _count(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _lines(body, indent):
    out = []
    for s in body.stmts:
        t = ": %s" % _type(s.shape) if s.shape is not None else ""
        head = "%s%%%s%s = %s(%s)%s" % (indent, s.id, t, s.op, ", ".join("%" + i for i in s.inputs), s.attrs)
        site = " @ %s" % _quote(s.site or "<root>")
        if s.op != "checkpoint":
            out.append(head + site)
            continue
        b = s.body
        out.append('%s name=%s policy="nothing_saveable"%s {' % (head, _quote(b.name), site))
        out.append("%s  body(%s)" % (indent, ", ".join("%s: %s" % (p[0], p[2]) for p in b.params)))
        out.extend(_lines(b, indent + "  "))
        out.append("%s  return %%%s" % (indent, b.out))
        out.append("%s}" % indent)
    return out


def _used_ids(body):
    used = set()
    for s in body.stmts:
        used.update(s.inputs)
    return used


def _filled(declared, inputs, weights):
    """The declared inputs of a shapes-only export with contents: a meta
    tensor's from `weights` by its name (a parameter read transposed, from
    its own, transposed); every other's (token ids, constants computed
    beside the trace) its own. An input `weights` lacks, or holds at
    another shape, is an ExportError naming it."""
    names = {v[0]: (key, inputs.owner[v[0]]) for key, v in inputs.by_key.items()}
    out, missing = [], []
    for pid, t, data in declared:
        if t.is_meta:
            key, (kind, name) = names[pid]
            transposed = key[0] == "t" and key[2]
            source = name[:-len(".T")] if transposed else name
            real = weights.get(source)
            if real is None:
                missing.append("%s %r (%s)" % (kind, source, _type(t.shape, t.dtype)))
                continue
            want = tuple(t.shape)[::-1] if transposed else tuple(t.shape)
            if tuple(real.shape) != want:
                missing.append("%s %r: weights hold %s, the model's is %s" % (kind, source, tuple(real.shape), want))
                continue
            t = real.detach().t() if transposed else real.detach()
        out.append((pid, t, data))
    if missing:
        raise ExportError("weights= lacks %d of the program's inputs:\n%s"
                          % (len(missing), "\n".join("  " + m for m in missing)))
    return out


def write_program(out_dir, name, top, inputs, assumed=None, weights=None):
    """Writes out_dir/program.txt (the program `name` whose body is `top`)
    and one .npy per input it reads; returns the program's text. assumed:
    None, or a shapes-only export's [(module path, op, what)]: the header
    says so and lists them, and no .npy is written unless `weights` (a dict
    of real tensors by parameter, buffer or argument name) gives the
    contents the meta device lacks."""
    used = _used_ids(top) | {top.out}
    declared = inputs.declared(used)
    if assumed is not None and weights is not None:
        declared = _filled(declared, inputs, weights)
    decls = ["%s: %s%s" % (pid, _type(t.shape, t.dtype), " data" if data else "") for pid, t, data in declared]
    text = "# exported from PyTorch %s by tools/torch_export.py\n" % torch.__version__
    if assumed is not None and weights is not None:
        text += "# shapes only (the model on the meta device), its input files from the weights given\n"
    elif assumed is not None:
        text += ("# shapes only (the model on the meta device): no input files; for remat plan, or a run on "
                 "generated inputs\n")
        text += "".join("# assumed at %s (aten.%s): %s\n" % (path or "<root>", op, what) for path, op, what in assumed)
    text += "program %s(%s) {\n" % (_ident(name), ", ".join(decls))
    text += "\n".join(_lines(top, "  ")) + "\n  return %%%s\n}\n" % top.out
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "program.txt"), "w") as f:
        f.write(text)
    for pid, t, _ in declared if assumed is None or weights is not None else ():
        kind = np.int32 if t.dtype in _INTEGER else np.float32
        np.save(os.path.join(out_dir, pid + ".npy"), t.detach().contiguous().numpy().astype(kind))
    return text
