#!/usr/bin/env python3
"""A PyTorch engine for remat programs: `remat conform --engine-cmd` runs it.

    tools/torch_engine.py DIR

DIR holds program.txt (engines/api/program_text.h's format), one <input>.npy
per parameter and case.json ({"wrt": [names]}; without it, every float
input). The engine interprets the program on PyTorch (float32, CPU,
autograd) and writes DIR/loss.npy, DIR/grad_<input>.npy for each name in
wrt, DIR/state_<parameter>.npy for each state op (batch norm's new running
statistics), and DIR/stats.json with residual_bytes: the bytes PyTorch keeps
for the backward pass, counted with torch.autograd.graph.saved_tensors_hooks
outside checkpoint regions (each storage once, the inputs excluded, as remat
counts), plus, for each checkpoint region, the inputs it holds and the
outputs its selective-checkpointing policy saves (views, which share a
storage, not counted).

What PyTorch can express, it runs; the rest it refuses with "unsupported: WHY"
on stdout and exit status 77 (tools/conform.h's kUnsupportedExit):
  checkpoint policy="nothing_saveable"     torch.utils.checkpoint.checkpoint(fn, use_reentrant=False)
  checkpoint policy="everything_saveable"  fn run inline (stores everything)
  dots_saveable (checkpoint_dots), dots_with_no_batch_dims_saveable,
  save_only_these_names, save_any_names_but_these,
  save_anything_except_these_names, save_from_both_policies
                                           PyTorch 2's selective activation checkpointing:
                                           checkpoint(fn, use_reentrant=False, context_fn=
                                           create_selective_checkpoint_contexts(policy)), the
                                           policy MUST_SAVE for aten.mm/addmm/mv/dot (and
                                           bmm/baddbmm when batch dims are saveable), or for
                                           the custom op remat::checkpoint_name with a label in the list
                                           (a name op inside such a region is remat::checkpoint_name, a
                                           copy: PyTorch has no checkpoint_name); the rest
                                           PREFER_RECOMPUTE. Unsupported before PyTorch 2.4.
  offload and memory_budget policies       unsupported (no PyTorch equivalent on CPU)
  scan without a schedule                  a Python loop over the steps
  chain without a schedule                 its blocks in order
  scan or chain, schedule="segments:K"     torch.utils.checkpoint.checkpoint_sequential(steps or
                                           blocks, K, carry, use_reentrant=False): the steps or
                                           blocks as functions of the carry (their other inputs
                                           closed over), their regions run inline; PyTorch runs
                                           its last segment plainly where remat recomputes it, so
                                           the residuals differ, not the gradients
  scan or chain, any other schedule        unsupported (no PyTorch equivalent of remat's schedules)
  dropout                                  the contract's mask (engines/api/philox.h), drawn in numpy
Every other op of engines/api/program.h maps to PyTorch's (ids and targets as
int64 indices). No torch: the message "unsupported: PyTorch is not installed"
and exit 77.

stats.json has no peak_bytes: PyTorch's CPU allocator keeps no high-water
mark (torch.cuda.max_memory_allocated is CUDA's alone), and the resident set
of the interpreter (Python, the library, the allocator's cache) is not the
computation's peak that remat reports (CONTRACT.md, section 8).
"""

import functools
import json
import math
import os
import sys

from program_text import ParseError, load_case, schedule_count  # tools/program_text.py, beside this file

UNSUPPORTED_EXIT = 77
LAYER_NORM_EPS = 1e-5


class Unsupported(Exception):
    pass


class ProgramError(Exception):
    """A program this engine reads but that breaks the format's rules (a
    chain's block that is not a checkpoint): the message names the op."""


# ------------------------------------------------------------ the contract's generator

_PHILOX_MUL = (0xD2511F53, 0xCD9E8D57)
_PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)


def random_bits(np, seed, key, n):
    """The n words RandomBits(seed, key, i) gives, i = 0..n-1
    (engines/api/philox.cc): Philox4x32-10 of the counter {i / 4, key} under
    the key {seed, 0}, word i % 4; uint64 arithmetic, masked to 32 bits."""
    m = np.uint64(0xFFFFFFFF)
    blocks = (n + 3) // 4
    c0 = np.arange(blocks, dtype=np.uint64)
    c1 = np.zeros(blocks, dtype=np.uint64)
    c2 = np.full(blocks, key & 0xFFFFFFFF, dtype=np.uint64)
    c3 = np.full(blocks, (key >> 32) & 0xFFFFFFFF, dtype=np.uint64)
    k0, k1 = np.uint64(int(seed) & 0xFFFFFFFF), np.uint64(0)
    for _ in range(10):
        p0 = np.uint64(_PHILOX_MUL[0]) * c0
        p1 = np.uint64(_PHILOX_MUL[1]) * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & m
        hi1, lo1 = p1 >> np.uint64(32), p1 & m
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + np.uint64(_PHILOX_WEYL[0])) & m
        k1 = (k1 + np.uint64(_PHILOX_WEYL[1])) & m
    return np.stack([c0, c1, c2, c3], axis=1).reshape(-1)[:n]


# ------------------------------------------------------------ policies

_DOTS = ("mm", "addmm", "mv", "dot")
_BATCHED_DOTS = ("bmm", "baddbmm")


def _op_name(op):
    """aten.mm.default -> "mm"; remat::name -> "remat::name"."""
    packet = getattr(op, "overloadpacket", None)
    return getattr(packet, "__name__", str(op)).split(".")[-1] if packet is not None else str(op)


def save_predicate(spec, where, is_name_op):
    """For a checkpoint region's policy text (Policy::Parse's forms), None for
    nothing_saveable (a plain checkpoint), "inline" for everything_saveable,
    or f(op, args) -> whether selective checkpointing saves that op's output."""
    head, _, args = spec.partition(":")
    names = [n for n in args.split(",") if n]
    no_names = {"nothing_saveable": None, "everything_saveable": "inline",
                "dots_saveable": lambda op, a: _op_name(op) in _DOTS + _BATCHED_DOTS,
                "checkpoint_dots": lambda op, a: _op_name(op) in _DOTS + _BATCHED_DOTS,
                "dots_with_no_batch_dims_saveable": lambda op, a: _op_name(op) in _DOTS,
                "checkpoint_dots_with_no_batch_dims": lambda op, a: _op_name(op) in _DOTS}
    if head in no_names:
        if args:
            raise ParseError("%s: policy %r: %s takes no names" % (where, spec, head))
        return no_names[head]
    if head == "save_only_these_names":
        return lambda op, a: is_name_op(op) and a[1] in names
    if head == "save_any_names_but_these":
        return lambda op, a: is_name_op(op) and a[1] not in names
    if head == "save_anything_except_these_names":
        return lambda op, a: not (is_name_op(op) and a[1] in names)
    if head == "save_from_both_policies":
        first, plus, second = args.partition("+")
        if not plus:
            raise ParseError("%s: policy %r: expected save_from_both_policies:P+Q" % (where, spec))
        p, q = save_predicate(first, where, is_name_op), save_predicate(second, where, is_name_op)

        def as_fn(f):
            return (lambda op, a: False) if f is None else (lambda op, a: True) if f == "inline" else f
        p, q = as_fn(p), as_fn(q)
        return lambda op, a: p(op, a) or q(op, a)
    raise Unsupported("%s: checkpoint policy %r (no PyTorch equivalent on CPU: offloading and remat's "
                      "memory_budget planner are not selective checkpointing)" % (where, spec))


def _names_policy(spec):
    return "names" in spec.partition(":")[0] or (spec.startswith("save_from_both_policies")
                                                 and "names" in spec)


# ------------------------------------------------------------ the interpreter

class Interpreter:
    """Runs a parsed program on PyTorch. held: what checkpoint regions keep
    (their inputs); sac_bytes: what selective checkpointing saves; state:
    the state ops' values by parameter name (from the forward pass)."""

    def __init__(self, torch, np, program):
        self.torch, self.np, self.program = torch, np, program
        self.held, self.sac_bytes, self.state = [], [0], {}
        from torch.utils import checkpoint as tcp
        self.tcp = tcp
        self.sac = getattr(tcp, "create_selective_checkpoint_contexts", None)
        self.name_op = None

    def _remat_name(self):
        """remat::checkpoint_name(x, label): a copy (a custom op may not alias its input)
        that selective checkpointing can tell by label."""
        if self.name_op is None:
            torch = self.torch
            lib_op = getattr(torch.ops.remat, "checkpoint_name", None)
            if not isinstance(lib_op, torch._ops.OpOverloadPacket):
                @torch.library.custom_op("remat::checkpoint_name", mutates_args=())
                def name(x: torch.Tensor, label: str) -> torch.Tensor:
                    return x.clone()

                @name.register_fake
                def _(x, label):
                    return torch.empty_like(x)

                name.register_autograd(lambda ctx, g: (g, None))
                lib_op = torch.ops.remat.checkpoint_name
            self.name_op = lib_op
        return self.name_op

    def _checkpoint(self, op, x, at, names_as_ops):
        torch, tcp = self.torch, self.tcp
        spec = op.attrs.get("policy", "nothing_saveable")
        named = _names_policy(spec)
        if named and self.sac is None:
            raise Unsupported("%s: checkpoint policy %r (PyTorch %s has no selective checkpointing)"
                              % (at, spec, torch.__version__))
        name_op = self._remat_name() if named else None
        pred = save_predicate(spec, at, lambda o: name_op is not None and o == name_op.default)
        fn = (lambda b: (lambda *a: self.run(b, list(a), at, names_as_ops=named)))(op.body)
        if pred == "inline":
            return fn(*x)
        self.held.extend(x)
        if pred is None:
            return tcp.checkpoint(fn, *x, use_reentrant=False)
        if self.sac is None:
            raise Unsupported("%s: checkpoint policy %r (PyTorch %s has no selective checkpointing)"
                              % (at, spec, torch.__version__))

        def policy(ctx, o, *args, **kwargs):
            save = bool(pred(o, args))
            if save and not ctx.is_recompute:
                self.sac_bytes[0] += self._output_bytes(o, args, kwargs)
            return tcp.CheckpointPolicy.MUST_SAVE if save else tcp.CheckpointPolicy.PREFER_RECOMPUTE

        return tcp.checkpoint(fn, *x, use_reentrant=False,
                              context_fn=functools.partial(self.sac, policy))

    def _segments(self, attrs, kind, at):
        """K of a scan's or a chain's schedule="segments:K" (remat's name for
        checkpoint_sequential's); 0 without a schedule. Any other schedule
        of remat's is unsupported: PyTorch has no equivalent."""
        spec = attrs.get("schedule")
        if not spec:
            return 0
        try:
            k = schedule_count(spec, "segments")
        except ValueError as e:
            raise ProgramError("%s: %s" % (at, e))
        if k is not None:
            return k
        raise Unsupported("%s: %s schedule %r (PyTorch's checkpoint_sequential is remat's segments:K; "
                          "no PyTorch equivalent of the others)" % (at, kind, spec))

    def _blocks(self, chain, x, at, names_as_ops):
        """A chain's blocks as functions of the carry alone, each block's
        other inputs (its weights, the chain's parameters) closed over, and
        each block's body run inline: as the modules of an nn.Sequential
        that checkpoint_sequential checkpoints by segments."""
        env = {pid: v for (pid, _, _), v in zip(chain.params, x)}
        fns = []
        for i, block in enumerate(chain.ops):
            if block.kind != "checkpoint":
                raise ProgramError("%s: block %%%s is a %s, not a checkpoint" % (at, block.out, block.kind))
            carry_at = 0 if i == 0 else block.inputs.index(chain.ops[i - 1].out)
            others = [None if j == carry_at else env[v] for j, v in enumerate(block.inputs)]

            def fn(c, block=block, others=others, carry_at=carry_at):
                args = list(others)
                args[carry_at] = c
                return self.run(block.body, args, "%s: %%%s = checkpoint" % (at, block.out), names_as_ops,
                                inline=True)
            fns.append(fn)
        if fns and chain.ops[0].inputs[0] != chain.params[0][0]:
            raise ProgramError("%s: block 0 does not take the chain's first input as its carry" % at)
        return fns

    def _checkpoint_sequential(self, fns, segments, x):
        """torch.utils.checkpoint.checkpoint_sequential(fns, segments, x),
        non-reentrant. Its segments are len // segments functions each, all
        but the last checkpointed (the last runs plainly, its activations
        kept); a checkpointed segment holds its input, which the residual
        count adds as it does a checkpoint region's (held). More segments
        than functions: one per function (as remat's segments:K)."""
        segments = min(segments, len(fns))
        if segments == 0:
            return x
        size = len(fns) // segments

        def holding(i, f):
            def g(c):
                if i % size == 0 and i < size * (segments - 1) and self.torch.is_grad_enabled():
                    self.held.append(c)
                return f(c)
            return g
        return self.tcp.checkpoint_sequential([holding(i, f) for i, f in enumerate(fns)], segments, x,
                                              use_reentrant=False)

    def _output_bytes(self, o, args, kwargs):
        """The bytes of o's outputs, from a run on meta tensors; 0 for a view."""
        torch = self.torch
        schema = getattr(o, "_schema", None)
        if schema is not None and any(r.alias_info is not None for r in schema.returns):
            return 0
        meta = lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v  # noqa: E731
        try:
            out = o(*[meta(a) for a in args], **{k: meta(v) for k, v in kwargs.items()})
        except (RuntimeError, NotImplementedError):  # no meta kernel (.item() of the seed): run it
            with torch.no_grad():
                out = o(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        return sum(t.numel() * t.element_size() for t in outs if isinstance(t, torch.Tensor))

    def dropout_keep(self, seed, key, shape, p):
        """The contract's mask: True where an element is kept (a bool tensor of `shape`)."""
        np = self.np
        bits = random_bits(np, int(seed), key, math.prod(shape)).reshape(shape)
        return self.torch.from_numpy(bits >= np.uint64(int(math.floor(math.ldexp(p, 32)))))

    def run(self, body, values, where, names_as_ops=False, inline=False):
        """The value of `body` on `values`. inline: its checkpoint regions,
        nested ones too, run as plain code (a block or a step inside
        checkpoint_sequential, which decides what is kept)."""
        torch, np = self.torch, self.np
        import torch.nn.functional as F
        env = {pid: v for (pid, _, _), v in zip(body.params, values)}
        for op in body.ops:
            at = "%s: %%%s = %s" % (where, op.out, op.kind)
            x = [env[v] for v in op.inputs]
            k = op.kind
            a = op.attrs
            scalar = lambda: float(a["scalar"])  # noqa: E731
            ints = [int(i) for i in a.get("ints", [])]
            if k == "matmul":
                y = torch.mm(x[0], x[1]) if x[0].dim() == 2 else torch.bmm(x[0], x[1])
            elif k in ("relu", "sin", "cos", "exp", "log"):
                y = getattr(torch, k)(x[0])
            elif k == "square":
                y = x[0] * x[0]
            elif k in ("add", "bias_add"):
                y = x[0] + x[1]
            elif k == "sub":
                y = x[0] - x[1]
            elif k == "neg":
                y = -x[0]
            elif k == "mul":
                y = x[0] * x[1]
            elif k in ("sum", "mean", "amax"):
                dims = ints or list(range(x[0].dim()))  # no ints=: every axis
                keep = a.get("keepdim", "0") == "1"
                if k == "sum" and not ints and not keep:
                    y = x[0].sum()
                else:
                    y = getattr(torch, k)(x[0], dim=dims, keepdim=keep)  # amax: ties split evenly
            elif k == "div":
                y = x[0] / x[1]
            elif k in ("rsqrt", "sqrt", "tanh", "sigmoid"):
                y = getattr(torch, k)(x[0])
            elif k == "pow":
                y = torch.pow(x[0], float(np.float32(scalar())))
            elif k == "hardtanh":
                y = F.hardtanh(x[0], float(ints[0]), float(ints[1]))
            elif k == "where":
                y = torch.where(x[0] != 0, x[1], x[2])
            elif k == "name":
                y = self.name_op(x[0], a["name"]) if names_as_ops else x[0]
            elif k == "softmax":
                y = torch.softmax(x[0], dim=-1)
            elif k == "log_softmax":
                y = torch.log_softmax(x[0], dim=-1)
            elif k == "layer_norm":
                eps = scalar() if "scalar" in a else LAYER_NORM_EPS
                y = F.layer_norm(x[0], (x[0].shape[-1],), x[1], x[2], eps=eps)
            elif k == "rms_norm":
                y = x[0] * torch.rsqrt(x[0].square().mean(-1, keepdim=True) + scalar()) * x[1]
            elif k == "gelu":
                y = F.gelu(x[0], approximate="tanh")
            elif k == "gelu_erf":
                y = F.gelu(x[0])
            elif k == "silu":
                y = F.silu(x[0])
            elif k == "scale":
                y = x[0] * float(np.float32(scalar()))  # c rounded to f32, as Kernels::Scale
            elif k == "transpose":
                y = x[0].transpose(-1, -2)
            elif k == "split_heads":
                b, h = ints
                bs, d = x[0].shape
                y = x[0].reshape(b, bs // b, h, d // h).permute(0, 2, 1, 3).reshape(b * h, bs // b, d // h)
            elif k == "merge_heads":
                (b,) = ints
                bh, s, dh = x[0].shape
                y = x[0].reshape(b, bh // b, s, dh).permute(0, 2, 1, 3).reshape(b * s, (bh // b) * dh)
            elif k == "reshape":
                y = x[0].reshape(ints)
            elif k == "permute":
                y = x[0].permute(ints)
            elif k == "slice":
                start, length, step = ints[1], ints[2], (ints[3] if len(ints) == 4 else 1)
                end = start + (length - 1) * step + 1 if length else start
                y = x[0][(slice(None),) * ints[0] + (slice(start, end, step),)]
            elif k == "select":
                y = x[0].select(ints[0], ints[1])
            elif k == "expand":
                y = x[0].expand(ints)
            elif k == "cat":
                y = torch.cat([x[0], x[1]], dim=ints[0])
            elif k == "embedding":
                y = F.embedding(x[1], x[0], padding_idx=ints[0] if ints else None)
            elif k == "masked_fill":
                y = x[0].masked_fill(x[1] != 0, scalar())
            elif k == "cross_entropy":
                y = F.cross_entropy(x[0], x[1], ignore_index=ints[0] if ints else -100)
            elif k == "dropout":
                p = scalar()
                keep = self.dropout_keep(x[1], ints[0], tuple(x[0].shape), p)
                y = torch.where(keep, x[0] * float(np.float32(1.0 / (1.0 - p))), torch.zeros_like(x[0]))
            elif k in ("conv2d", "conv2d_bias"):
                g = ints if len(ints) == 7 else [ints[0], ints[0], ints[1], ints[1], 1, 1, 1]
                y = F.conv2d(x[0], x[1], x[2] if k == "conv2d_bias" else None, stride=(g[0], g[1]),
                             padding=(g[2], g[3]), dilation=(g[4], g[5]), groups=g[6])
            elif k == "max_pool2d":
                y = F.max_pool2d(x[0], ints[0], ints[1], ints[2])
            elif k == "adaptive_avg_pool2d":
                y = F.adaptive_avg_pool2d(x[0], ints)
            elif k == "global_avg_pool":
                y = x[0].mean(dim=(2, 3))
            elif k == "batch_norm":
                y = F.batch_norm(x[0], None, None, x[1], x[2], training=True, eps=scalar())
            elif k in ("batch_norm_running_mean", "batch_norm_running_var"):
                axes = (0,) if x[0].dim() == 2 else (0, 2, 3)
                stat = x[0].mean(dim=axes) if k.endswith("mean") else x[0].var(dim=axes, unbiased=True)
                y = (1 - scalar()) * x[1] + scalar() * stat
            elif k == "top_k_softmax":
                # Ties to the lowest index, as remat's (torch.topk breaks them
                # as it likes): a stable descending sort.
                order = torch.sort(x[0].detach(), dim=-1, descending=True, stable=True).indices
                index = order[..., :ints[0]]
                values = x[0].gather(-1, index)
                y = torch.zeros_like(x[0]).scatter(-1, index, torch.softmax(values, dim=-1))
            elif k == "state":
                y = x[0]
                self.state[a["name"]] = y.detach()
            elif k == "checkpoint":
                if inline:
                    y = self.run(op.body, x, at, names_as_ops, inline=True)
                else:
                    y = self._checkpoint(op, x, at, names_as_ops)
            elif k == "scan":
                segments = self._segments(a, "scan", at)
                num_consts = int(a.get("consts", 0))  # loop invariants, seen whole by every step
                consts = list(x[len(x) - num_consts:])
                carry, xs = x[0], x[1:len(x) - num_consts]
                # unbind once: indexing t[step] would make each step's
                # backward add a gradient of all of t (select_backward),
                # O(L^2) work where a PyTorch user's loop over layers has O(L).
                steps = [t.unbind(0) for t in xs]
                length = xs[0].shape[0] if xs else 0
                if segments:
                    # Bound now: checkpoint_sequential calls them again in
                    # the backward pass, after this loop has moved on.
                    step_fns = [(lambda i, step_body=op.body, where=at:
                                 lambda c: self.run(step_body, [c] + [t[i] for t in steps] + consts, where,
                                                    names_as_ops, inline=True))(i)
                                for i in range(length)]
                    y = self._checkpoint_sequential(step_fns, segments, carry)
                else:
                    for step in range(length):
                        carry = self.run(op.body, [carry] + [t[step] for t in steps] + consts, at,
                                         names_as_ops, inline)
                    y = carry
            elif k == "chain":
                segments = self._segments(a, "chain", at)
                if segments:
                    y = self._checkpoint_sequential(self._blocks(op.body, x, at, names_as_ops), segments, x[0])
                else:
                    y = self.run(op.body, x, at, names_as_ops, inline)
            else:
                raise Unsupported("%s: op %r" % (at, k))
            env[op.out] = y
        return env[body.result]


def torch_arguments(torch, np, program, arrays, wrt):
    """The program's arguments as PyTorch takes them: ids and targets as
    int64 indices, the rest float32, requiring grad where named in wrt."""
    args = []
    for (pid, name, _), a in zip(program.params, arrays):
        if pid in program.int_params:
            args.append(torch.from_numpy(a.astype(np.int64)))
        else:
            args.append(torch.from_numpy(a.astype(np.float32)).requires_grad_(name in wrt))
    return args


def main(argv):
    if len(argv) != 2:
        print("usage: torch_engine.py DIR", file=sys.stderr)
        return 2
    d = argv[1]
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print("unsupported: PyTorch is not installed (%s)" % e)
        return UNSUPPORTED_EXIT
    program, wrt, arrays = load_case(d, np)
    args = torch_arguments(torch, np, program, arrays, wrt)
    torch.manual_seed(0)

    saved = []

    def pack(t):
        saved.append(t)
        return t

    interp = Interpreter(torch, np, program)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = interp.run(program, args, "program %s" % program.name)
    except Unsupported as e:
        print("unsupported: %s" % e)
        return UNSUPPORTED_EXIT
    except ProgramError as e:
        print("torch_engine.py: %s" % e, file=sys.stderr)
        return 1
    storage = (lambda t: t.untyped_storage()) if hasattr(torch.Tensor, "untyped_storage") else (lambda t: t.storage())
    arg_ptrs = {storage(a).data_ptr() for a in args}
    seen, residual = set(), interp.sac_bytes[0]
    for t in saved + interp.held:
        s = storage(t)
        if s.data_ptr() in arg_ptrs or s.data_ptr() in seen:
            continue
        seen.add(s.data_ptr())
        residual += s.nbytes()
    del saved
    interp.held = []
    by_name = {name: a for (_, name, _), a in zip(program.params, args)}
    grads = torch.autograd.grad(loss, [by_name[n] for n in wrt], allow_unused=True)
    np.save(os.path.join(d, "loss.npy"), loss.detach().numpy().astype(np.float32))
    for n, g in zip(wrt, grads):
        g = torch.zeros_like(by_name[n]) if g is None else g
        np.save(os.path.join(d, "grad_%s.npy" % n), g.detach().numpy().astype(np.float32))
    for n, v in interp.state.items():
        np.save(os.path.join(d, "state_%s.npy" % n), v.numpy().astype(np.float32))
    with open(os.path.join(d, "stats.json"), "w") as f:
        json.dump({"engine": "torch %s" % torch.__version__, "residual_bytes": residual}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
