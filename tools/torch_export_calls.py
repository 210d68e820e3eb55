"""tools/torch_export.py's call-site mapping: the functions and tensor
methods the traced code calls (arithmetic, matmul, views, slices, masks,
attention, reductions, dropout, the loss) as remat's ops."""

import math
import operator

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F

from torch_export_body import _Const, _Folded, _Pieces
from torch_export_program import _INTEGER
from torch_export_trace import _value

# Dropout's seed, an i32[] input of the program (one tensor, so that every
# body that reads it is given the same input), and the last key given.
_DROPOUT_SEED = [torch.tensor(0, dtype=torch.int32)]
_DROPOUT_KEYS = [0]
# Integer inputs of forward that the program reads reshaped (targets.view(-1)):
# program id -> the shape the program declares them with.
_RESHAPED = {}


class _CallOps:
    """The call_function and call_method nodes of a _Body (torch_export_body.py)."""

    def function_op(self, node):
        """The value of a call_function or call_method node: a program id, a
        _Const or _Pieces."""
        t, args, kwargs = node.target, node.args, node.kwargs
        names = {operator.add: "add", operator.iadd: "add", torch.add: "add", "add": "add",
                 "add_": "add", operator.mul: "mul", torch.mul: "mul",
                 "mul": "mul", operator.truediv: "div", torch.div: "div", "div": "div",
                 operator.sub: "sub", torch.sub: "sub", "sub": "sub"}
        # As before the split, when this table and the body's tensor names
        # (torch_export_body.py, tensor_path) were one variable: from the
        # first call mapped here on, a tensor of this body is named by the
        # module it is read from and its attribute, not by its first path.
        self.names = {}
        if t is getattr and args[1] == "shape":
            return _Const(tuple(self.shape(args[0])))
        elif t == "size":
            dims = tuple(self.shape(args[0]))
            dim = self.concrete(args[1]) if len(args) > 1 else kwargs.get("dim")
            return _Const(dims if dim is None else dims[dim])
        elif t is operator.getitem and isinstance(self.env.get(args[0]), _Const):
            item = self.env.get(args[0]).value[self.concrete(args[1])]
            # A piece of a folded tensor's split is folded too.
            return _Folded(item, None) if isinstance(item, torch.Tensor) else _Const(item)
        elif t in names:
            return self.binary(node, args[0], args[1], names[t])
        elif t in (operator.matmul, torch.matmul, torch.mm, torch.bmm, "matmul"):
            return self.matmul(node, args[0], args[1], self.shape(args[0]), self.shape(args[1]))
        elif t in ("split", torch.split, "chunk", torch.chunk):
            x = args[0]
            kw = dict(zip(("size_or_chunks", "dim"), args[1:]))
            kw.update(kwargs)
            n = kw.get("split_size_or_sections", kw.get("split_size", kw.get("chunks", kw.get("size_or_chunks"))))
            axis = int(kw.get("dim", 0)) % len(self.shape(x))
            pieces = _value(node, self.root)
            starts = np.cumsum([0] + [p.shape[axis] for p in pieces])
            return _Pieces(x, axis, [(int(a), int(b - a)) for a, b in zip(starts[:-1], starts[1:])])
        elif t is operator.getitem and isinstance(self.env.raw(args[0]), _Pieces):
            pieces = self.env.raw(args[0])
            start, length = pieces.bounds[self.concrete(args[1])]
            return self.emit("slice", [self.env[pieces.x]], node, " ints=[%d,%d,%d]" % (pieces.axis, start, length))
        elif t is operator.getitem and isinstance(args[0], torch.fx.Node):
            return self.index(node, args[0], self.concrete(args[1]))
        elif t in ("permute", torch.permute):
            dims = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
            return self.permute(node, args[0], kwargs.get("dims", dims))
        elif t == "contiguous":
            return self.env[args[0]]
        elif t in ("masked_fill", torch.masked_fill):
            value = self.concrete(args[2] if len(args) > 2 else kwargs.get("value"))
            if not isinstance(value, (int, float)):
                self.fail(node, "masked_fill with a tensor value (remat's fills with a number)")
            mask = self.mask_of(node, args[1] if len(args) > 1 else kwargs.get("mask"), self.shape(args[0]), False)
            return self.emit("masked_fill", [self.env[args[0]], mask], node, " scalar=%r" % float(value))
        elif t is getattr(F, "scaled_dot_product_attention", None) and t is not None:
            return self.attention(node, args, kwargs)
        elif t in (operator.pow, torch.pow, "pow") and args[1] == 2:
            return self.emit("square", [self.env[args[0]]], node)
        elif t in ("relu", "sin", "cos", "square", "neg", "exp", "log"):
            return self.emit(t, [self.env[args[0]]], node)
        elif t in (operator.neg, torch.neg, torch.exp, torch.log):
            return self.emit({operator.neg: "neg", torch.neg: "neg", torch.exp: "exp",
                              torch.log: "log"}[t], [self.env[args[0]]], node)
        elif t in ("sum", torch.sum, "mean", torch.mean):
            kind = "mean" if t in ("mean", torch.mean) else "sum"
            return self.reduce_all(node, args[0], kind, list(args[1:]) + list(kwargs.items()))
        elif t in ("transpose", torch.transpose):
            rank = len(self.shape(args[0]))
            d0, d1 = (self.concrete(d) % rank for d in args[1:3])
            perm = list(range(rank))
            perm[d0], perm[d1] = perm[d1], perm[d0]
            return self.permute(node, args[0], perm)
        elif t in ("t", torch.t) or (node.op == "call_function" and t is getattr and args[1] == "mT"):
            return self.emit("transpose", [self.env[args[0]]], node)
        elif t == "softmax":
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim not in (-1, len(self.shape(args[0])) - 1):
                self.fail(node, "softmax over dim %r (remat's is over the last axis)" % dim)
            return self.emit("softmax", [self.env[args[0]]], node)
        elif t is F.layer_norm:
            return self.layer_norm(node, args, kwargs)
        elif t in (torch.flatten, "flatten", "view", "reshape", torch.reshape):
            # The output's shape, as the example run found it (x.view(x.size(0), -1) included).
            if self.dtype(args[0]) in _INTEGER:
                return self.reshape_integer(node, args[0])
            else:
                return self.emit("reshape", [self.env[args[0]]], node,
                                 " ints=[%s]" % ",".join(str(d) for d in self.shape(node)))
        elif t is F.cross_entropy:
            kw = dict(kwargs)
            return self.cross_entropy(node, kw.get("weight"), kw.get("ignore_index", -100),
                                      kw.get("reduction", "mean"), kw.get("label_smoothing", 0.0),
                                      args[0], args[1] if len(args) > 1 else kw.get("target"))
        else:
            y = self.unary(node, t, args, kwargs) if callable(t) else None
            if y is None:
                self.fail(node, "%s %s" % (node.op, getattr(t, "__name__", t)))
            return y

    def binary(self, node, a, b, name):
        a, b = self.concrete(a), self.concrete(b)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            ops = {"add": operator.add, "mul": operator.mul, "sub": operator.sub, "div": operator.truediv}
            return _Const(ops[name](a, b))
        if isinstance(b, (int, float)) and name in ("mul", "div"):
            c = float(b) if name == "mul" else 1.0 / float(b)
            return self.emit("scale", [self.tensor_arg(node, a)], node, " scalar=%r" % c)
        if isinstance(a, (int, float)) and name == "mul":
            return self.emit("scale", [self.tensor_arg(node, b)], node, " scalar=%r" % float(a))
        if name in ("add", "mul", "sub") and isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node):
            sa, sb = self.shape(a), self.shape(b)
            if sa == sb:
                if name == "mul" and a is b:
                    return self.emit("square", [self.env[a]], node)
                return self.emit(name, [self.env[a], self.env[b]], node)
            if name == "add" and sa is not None and sb is not None:
                if len(sb) > len(sa):
                    a, b, sa, sb = b, a, sb, sa
                trail = tuple(sb)
                while trail and trail[0] == 1 and len(trail) > 1:
                    trail = trail[1:]
                if trail and len(trail) < len(sa) and tuple(sa[len(sa) - len(trail):]) == trail:
                    return self.broadcast_add(node, a, b, sa, trail)
            self.fail(node, "%s of shapes %s and %s (broadcasting)" % (name, sa, sb))
        self.fail(node, "%s(%r, %r)" % (name, a, b))

    def broadcast_add(self, node, a, b, sa, trail):
        """a (..., *trail) + b (trail, after leading 1s): bias_add on a viewed
        as rows of prod(trail) elements (b's gradient is the sum over rows,
        as PyTorch's broadcasting gives)."""
        n = int(np.prod(trail))
        rows = int(np.prod(sa)) // n
        x = self.reshaped(self.env[a], (rows, n), node) if len(sa) != 2 or len(trail) != 1 else self.env[a]
        bias = self.reshaped(self.env[b], (n,), node) if tuple(self.shape(b)) != (n,) else self.env[b]
        y = self.emit("bias_add", [x, bias], node, out_shape=(rows, n))
        return self.reshaped(y, sa, node) if tuple(sa) != (rows, n) else y

    def matmul(self, node, a, b, sa, sb):
        """PyTorch's matmul on rank 2 to 4 as remat's (rank 2, or batched
        rank 3): leading axes merged by reshapes. Broadcasting a batch is not
        taken."""
        out = tuple(self.shape(node))
        if len(sa) in (2, 3) and len(sb) == len(sa):
            return self.emit("matmul", [self.env[a], self.env[b]], node)
        if len(sa) >= 3 and len(sb) == 2:  # (..., k) @ (k, n): rows
            rows = int(np.prod(sa[:-1]))
            y = self.emit("matmul", [self.reshaped(self.env[a], (rows, sa[-1]), node), self.env[b]], node, out_shape=(rows, sb[1]))
            return self.reshaped(y, out, node)
        if len(sa) == len(sb) == 4 and sa[:2] == sb[:2]:
            batch = sa[0] * sa[1]
            y = self.emit("matmul", [self.reshaped(self.env[a], (batch,) + tuple(sa[2:]), node),
                                     self.reshaped(self.env[b], (batch,) + tuple(sb[2:]), node)], node,
                          out_shape=(batch, sa[2], sb[3]))
            return self.reshaped(y, out, node)
        self.fail(node, "matmul of shapes %s and %s (remat's: rank 2, batched rank 3 or 4 with equal batch "
                  "axes, or (..., k) @ (k, n))" % (sa, sb))

    def permute(self, node, x, perm):
        perm = [int(d) % len(self.shape(x)) for d in perm]
        if perm == list(range(len(perm))):
            return self.env[x]
        if len(perm) in (2, 3) and perm == list(range(len(perm) - 2)) + [len(perm) - 1, len(perm) - 2]:
            return self.emit("transpose", [self.env[x]], node)
        return self.emit("permute", [self.env[x]], node, " ints=[%s]" % ",".join(str(d) for d in perm))

    def mask_of(self, node, mask, target_shape, keep_where):
        """A folded boolean mask as remat's masked_fill's: i32, the target's
        shape, 1 where the fill goes. keep_where: the mask marks what is kept
        (attn_mask), not what is filled (masked_fill)."""
        f = self.env.raw(mask) if isinstance(mask, torch.fx.Node) else None
        if not isinstance(f, _Folded):
            self.fail(node, "a mask computed from the model's inputs (remat's masked_fill takes a mask fixed at "
                      "export: one made from buffers, shapes and constants, such as a causal mask)")
        m = f.value.to(torch.bool)
        if keep_where:
            m = ~m
        try:
            m = m.expand(target_shape).to(torch.int32).contiguous()
        except RuntimeError:
            self.fail(node, "a mask of shape %s on scores %s" % (tuple(f.value.shape), target_shape))
        return self.materialize(_Folded(m, (f.name + ".mask") if f.name else None), "mask")

    def attention(self, node, args, kwargs):
        """F.scaled_dot_product_attention as its definition: softmax(q k^T *
        scale + mask) v, with dropout on the probabilities."""
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        a = dict(zip(names, args))
        a.update(kwargs)
        q, k, v = a["query"], a["key"], a["value"]
        sq, sk, sv = self.shape(q), self.shape(k), self.shape(v)
        if a.get("enable_gqa") or len(sq) != 4 or sk != sv or sq[:2] != sk[:2] or sq[3] != sk[3]:
            self.fail(node, "scaled_dot_product_attention of q %s, k %s, v %s (remat's: (B, H, T, D) each, "
                      "no grouped query attention)" % (sq, sk, sv))
        scores_shape = (sq[0], sq[1], sq[2], sk[2])
        kt = self.emit("permute", [self.env[k]], node, " ints=[0,1,3,2]", out_shape=(sk[0], sk[1], sk[3], sk[2]))
        batch = sq[0] * sq[1]
        s = self.emit("matmul", [self.reshaped(self.env[q], (batch, sq[2], sq[3]), node),
                                 self.reshaped(kt, (batch, sk[3], sk[2]), node)], node, out_shape=(batch, sq[2], sk[2]))
        s = self.reshaped(s, scores_shape, node)
        scale = a.get("scale")
        s = self.emit("scale", [s], node, " scalar=%r" % (float(scale) if scale is not None else 1.0 / math.sqrt(sq[3])),
                      out_shape=scores_shape)
        if a.get("is_causal"):
            causal = torch.ones(sq[2], sk[2], dtype=torch.bool).tril().logical_not()
            mask = self.materialize(_Folded(causal.expand(scores_shape).to(torch.int32).contiguous(), None),
                                    "causal_mask")
            s = self.emit("masked_fill", [s, mask], node, " scalar=-inf", out_shape=scores_shape)
        if a.get("attn_mask") is not None:
            if self.dtype(a["attn_mask"]) != torch.bool:
                self.fail(node, "scaled_dot_product_attention with a float attn_mask (remat's: a boolean mask)")
            s = self.emit("masked_fill", [s, self.mask_of(node, a["attn_mask"], scores_shape, True)], node,
                          " scalar=-inf", out_shape=scores_shape)
        p = self.emit("softmax", [s], node, out_shape=scores_shape)
        dropout_p = a.get("dropout_p", 0.0) or 0.0
        if dropout_p:
            p = self.dropout_value(node, dropout_p, p, scores_shape)
        y = self.emit("matmul", [self.reshaped(p, (batch, sq[2], sk[2]), node), self.reshaped(self.env[v], (batch,) + sv[2:], node)],
                      node, out_shape=(batch, sq[2], sv[3]))
        return self.reshaped(y, self.shape(node), node)

    def index(self, node, x, key):
        """x[...] with slices of step 1 (and ...): one slice op per axis cut."""
        sx = self.shape(x)
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (len(sx) - len(key) + 1) + key[i + 1:]
        if len(key) > len(sx) or not all(isinstance(k, slice) and k.step in (None, 1) for k in key):
            self.fail(node, "indexing with %r (remat's slice takes ranges of step 1 on each axis)" % (key,))
        y, cur = self.env[x], list(sx)
        for axis, k in enumerate(key):
            start, stop, _ = k.indices(sx[axis])
            if (start, stop) == (0, sx[axis]):
                continue
            cur[axis] = max(stop - start, 0)
            y = self.emit("slice", [y], node, " ints=[%d,%d,%d]" % (axis, start, cur[axis]), out_shape=tuple(cur))
        return y

    def layer_norm(self, node, args, kwargs):
        a = dict(zip(("input", "normalized_shape", "weight", "bias", "eps"), args))
        a.update(kwargs)
        x, eps = a["input"], a.get("eps", 1e-5)
        c = self.shape(x)[-1]
        if tuple(self.concrete(a["normalized_shape"])) != (c,) or eps != 1e-5 or a.get("weight") is None:
            self.fail(node, "F.layer_norm(normalized_shape=%s, weight=%s, eps=%g) (remat's: the last axis, "
                      "a weight, eps 1e-5)" % (tuple(self.concrete(a["normalized_shape"])), a.get("weight") is not None, eps))
        bias = self.env[a["bias"]] if a.get("bias") is not None else self.materialize(
            _Folded(torch.zeros(c), None), "zero_bias")
        return self.emit("layer_norm", [self.env[x], self.env[a["weight"]], bias], node)

    def reshape_integer(self, node, x):
        """A view of an integer input of forward (targets.view(-1)): the
        program declares that input with the view's shape (no op yields an
        integer value). Only where every use of the input is that view."""
        if x.op != "placeholder" or self.prefix or self.traced is not self.root:
            self.fail(node, "a reshape of integer values that are not an input of forward")
        if any(u.target not in (torch.flatten, "flatten", "view", "reshape", torch.reshape)
               or self.shape(u) != self.shape(node) for u in x.users):
            self.fail(node, "a reshape of the integer input %r, which is also used unreshaped (remat's "
                      "programs reshape no integer value: give the input in the shape it is used in)" % x.target)
        _RESHAPED[self.env[x]] = self.shape(node)
        return self.env[x]

    def reduce_all(self, node, x, kind, rest):
        if rest:
            self.fail(node, "%s over some axes (%r): only a sum of every element" % (kind, rest))
        s = self.emit("sum", [self.env[x]], node)
        if kind == "mean":
            n = int(np.prod(self.shape(x)))
            s = self.emit("scale", [s], node, " scalar=%r" % (1.0 / n))
        return s

    def unary(self, node, fn, args, kwargs):
        x = args[0]
        if fn in (torch.relu, F.relu):
            return self.emit("relu", [self.env[x]], node)
        if fn is torch.sin:
            return self.emit("sin", [self.env[x]], node)
        if fn is torch.cos:
            return self.emit("cos", [self.env[x]], node)
        if fn is torch.square:
            return self.emit("square", [self.env[x]], node)
        if fn is F.gelu:
            return self.emit("gelu" if kwargs.get("approximate", "none") == "tanh" else "gelu_erf", [self.env[x]], node)
        if fn is F.dropout:
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            training = args[2] if len(args) > 2 else kwargs.get("training", True)
            return self.dropout(node, p, training, x)
        if fn in (F.log_softmax, torch.log_softmax):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim not in (-1, len(self.shape(x)) - 1):
                self.fail(node, "log_softmax over dim %r (remat's is over the last axis)" % dim)
            return self.emit("log_softmax", [self.env[x]], node)
        if fn in (torch.softmax, F.softmax):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim not in (-1, len(self.shape(x)) - 1):
                self.fail(node, "softmax over dim %r (remat's is over the last axis)" % dim)
            return self.emit("softmax", [self.env[x]], node)
        return None

    def dropout(self, node, p, training, x):
        """Identity in eval mode or with p = 0; otherwise remat's dropout,
        whose mask is the contract's generator's (engines/api/philox.h) on the
        program's input `dropout_seed` and a key per dropout of the model, in
        export order: not PyTorch's mask (compare with PyTorch at p = 0 or in
        eval mode), the same on every recomputation."""
        if not training or p == 0:
            return self.env[x]
        return self.dropout_value(node, p, self.env[x], self.shape(node))

    def dropout_value(self, node, p, x, out_shape):
        if not 0 < p < 1:
            self.fail(node, "dropout with p=%r (remat's takes p in [0, 1))" % p)
        seed = self.params.get("dropout_seed", _DROPOUT_SEED[0], False)
        _DROPOUT_KEYS[0] += 1
        return self.emit("dropout", [x, seed], node, " scalar=%r ints=[%d]" % (float(p), _DROPOUT_KEYS[0]),
                         out_shape=out_shape)

    def cross_entropy(self, node, weight, ignore_index, reduction, label_smoothing, logits, targets):
        if weight is not None or reduction != "mean" or label_smoothing:
            self.fail(node, "cross_entropy(weight=%s, reduction=%r, label_smoothing=%r) (remat's: no weight, "
                      "the mean over rows, no smoothing)" % (weight is not None, reduction, label_smoothing))
        if self.shape(logits) is None or len(self.shape(logits)) != 2:
            self.fail(node, "cross_entropy of logits %s (remat's takes (N, C))" % (self.shape(logits),))
        # remat's cross_entropy refuses a target outside 0..C-1: an ignored
        # target in a later input is an error there, not a different loss.
        t = _value(targets, self.root) if isinstance(targets, torch.fx.Node) else None
        if isinstance(t, torch.Tensor) and bool((t == ignore_index).any()):
            self.fail(node, "cross_entropy with ignore_index=%d and targets that hold it (remat's averages over "
                      "every row)" % ignore_index)
        return self.emit("cross_entropy", [self.env[logits], self.env[targets]], node)
