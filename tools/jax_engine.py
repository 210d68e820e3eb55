#!/usr/bin/env python3
"""A JAX engine for remat programs: `remat conform --engine-cmd` runs it.

    .venv/bin/python tools/jax_engine.py DIR      (tools/python_env.sh makes .venv)

DIR holds program.txt (engines/api/program_text.h's format, read by
tools/program_text.py), one <input>.npy per parameter and case.json
({"wrt": [names]}; without it, every input). The engine builds the program
as one JAX function f (float32, CPU, x64 off, matmuls at full f32
precision) and differentiates it with JAX's own autodiff, jax.vjp over the
whole function in the wrt inputs (the others passed, not differentiated).
It runs in two compiled phases, as remat's engines run a gradient:
  forward   jax.jit(jax.vjp(f, ...)): the loss and the pullback, whose
            leaves are the residuals, materialized as the forward's outputs
  backward  jax.jit(pullback(1.0)): the gradients from the residuals
(One jit of value_and_grad would let XLA fuse the forward into the backward
and keep fewer bytes than the residuals saved_residuals lists: its peak is
not the peak of the program that saves them.) It writes DIR/loss.npy,
DIR/grad_<input>.npy for each name in wrt, DIR/state_<input>.npy for each
input a state op updates (engines/api/CONTRACT.md, state), and
DIR/stats.json.

The ops are jnp code that computes each op's forward definition
(engines/api/rules.cc, engines/api/kernels.h); their gradients are JAX's:
  matmul       jnp.matmul, precision HIGHEST (rank 3: batched dot_general)
  relu         jax.nn.relu (its custom JVP: relu'(0) = 0, as remat's)
  softmax      jax.nn.softmax over the last axis (max-subtracted; custom JVP)
  layer_norm   (x - mean) * rsqrt(biased var + eps) * gamma + beta (eps: scalar=, else 1e-5)
  gelu         jax.nn.gelu(approximate=True), the tanh form
  scale        x * float32(c)
  name         jax.ad_checkpoint.checkpoint_name(x, label)
  silu         jax.nn.silu
  add sub mul div  jnp's operators (numpy broadcasting, as remat's)
  sum mean amax    jnp.sum / jnp.mean / jnp.max over ints= (none: every
               axis), keepdims from keepdim=1 (jnp.max's gradient splits ties
               evenly, as remat's amax)
  rsqrt sqrt tanh  jax.lax's; sigmoid jax.nn.sigmoid; pow jnp.power by
               float32(p); where jnp.where(cond != 0, a, b)
  hardtanh     x strictly inside (lo, hi), else the clipped value with no
               gradient (relu6: ints=[0,6])
  log_softmax  jax.nn.log_softmax over the last axis
  gelu_erf     jax.nn.gelu(approximate=False), the erf form
  rms_norm     x * rsqrt(mean(x^2) + eps) * gamma
  dropout      x * float32(1 / (1 - p)) where Philox4x32-10 bits of (seed, the
               op's key, the element) >= floor(p 2^32), else 0: the bits of
               engines/api/philox.h, in uint32 jnp arithmetic (16-bit halves
               for the 64-bit products), so that JAX's recomputation of a
               region redraws the forward's mask from the saved seed
  embedding    jnp.take(table, ids, axis=0) (its gradient JAX's scatter-add);
               ints=[padding_idx]: that row read through stop_gradient
  masked_fill  jnp.where(mask != 0, fill, x)
  cross_entropy  mean of logsumexp(logits) - logits[target] over rows;
               ints=[ignore_index]: jnp.where drops those rows, the mean over the rest
  reshape      jnp.reshape to the op's dims
  conv2d       jax.lax.conv_general_dilated, NCHW/OIHW, precision HIGHEST
  max_pool2d   jax.lax.reduce_window with lax.max, -inf padding (its
               gradient XLA's select-and-scatter, the first of equal values)
  global_avg_pool  jnp.mean over H and W
  adaptive_avg_pool2d  jnp.mean over each of PyTorch's windows, stacked
  batch_norm   training mode: (x - mean) * rsqrt(biased var + eps) * gamma +
               beta, the statistics per channel over N (H W)
  batch_norm_running_mean, batch_norm_running_var
               (1 - m) * running + m * jnp.mean / jnp.var(ddof=1) per channel
  state        the identity; its value is the new state of the parameter it
               names, returned beside the output of every enclosing region
               (jax.checkpoint of a function with an auxiliary output) and
               written to DIR/state_<parameter>.npy
  permute      jnp.transpose by the op's permutation
  top_k_softmax  jax.lax.top_k (equal values: the lower index first, as
               remat's tie rule), softmax over the k values, scattered back
               with one_hot (zeros elsewhere); its gradient the choice held
               fixed
  the rest     jnp's elementwise ops, sum, swapaxes, reshape/transpose
Integer (i32) inputs (ids, targets, masks, seeds) are read from int32 .npy
files and never differentiated (a wrt naming one is an error). Ids and
targets outside their range are an error naming the op and the position, as
remat's kernels make them (JAX's gather would clamp them): checked in one
run op by op (jax.disable_jit) before the compiled ones.
The regions:
  checkpoint   jax.checkpoint(body, policy=P), P from the region's policy:
                 everything_saveable, nothing_saveable, dots_saveable
                 (checkpoint_dots), dots_with_no_batch_dims_saveable
                 (checkpoint_dots_with_no_batch_dims), save_only_these_names,
                 save_any_names_but_these, save_anything_except_these_names,
                 save_from_both_policies: jax.checkpoint_policies' namesakes;
                 save_and_offload_only_these_names, offload_dot_with_no_batch_dims:
                 theirs with offload_src="device", offload_dst="pinned_host"
                 (unsupported if this JAX cannot compile that on CPU);
                 memory_budget: unsupported (JAX has no such policy)
  scan         lax.scan over the xs, the body (its checkpoints inside) per step;
               schedule="checkpoint_every:K" (PyTorch's checkpoint_every, the one
               schedule JAX code writes as it is): step i as written when
               (i + 1) % K == 0, its regions inline (storing everything) at the
               others, as remat's engines run it: a lax.scan over groups of K
               steps, then one over the L % K left
  chain        its checkpoint blocks in order (a Python loop)
  scan, chain with another schedule (every:K, sqrt, revolve:C, budget:B, ...):
               unsupported (remat's own reversal schedules; JAX has none)
Anything else the program has (an op, an attribute, a policy this engine
does not know) is refused, never guessed: "unsupported: WHY" on stdout and
exit status 77 (tools/conform.h's kUnsupportedExit); no JAX installed is
unsupported too. A malformed program or input (bad text, a wrong shape, a
missing file) is an error: a message on stderr and exit status 1.

stats.json:
  residual_bytes  the bytes jax.ad_checkpoint's saved_residuals lists for the
                  function as run (f as a function of the wrt inputs, the
                  others closed over), each residual's size times its
                  itemsize, except those it reports "from the argument ..."
                  or "from a constant" (the inputs, wrt and not: remat
                  excludes arguments too). Every residual saved_residuals
                  lists is a distinct value of the jaxpr, so none is counted
                  twice. Offloaded residuals (f32<host>[...], an offload
                  policy's) are in it, and in host_residual_bytes too.
  peak_bytes      max(forward_peak_bytes, backward_peak_bytes), each from
                  memory_analysis() of that compiled phase:
                  argument_size_in_bytes + output_size_in_bytes
                  + temp_size_in_bytes - alias_size_in_bytes, XLA's bytes of
                  every buffer the call uses, its arguments and outputs
                  included (remat's peak includes them). The forward's
                  arguments are the inputs and its outputs the loss and the
                  residuals, so peak_bytes >= residual_bytes. The backward's
                  arguments are the residuals (inputs among them); inputs
                  the backward does not read, and the loss, are not in its
                  number. host_* fields (offloaded buffers) are in neither.
                  XLA's output size counts an output tuple's table of
                  pointers too (8 B an output: sin_plain's forward, 9
                  outputs of 4 B, is 108 B).
  memory_analysis every field of both phases' memory_analysis(), as reported
  residuals       saved_residuals' listing, one line per residual, each named
                  by its op's site ("f32[8,16] output of dot_general from
                  problems/x.cc:31 (%4 matmul)": Builder._site_call), the
                  excluded inputs included; remat conform sets it beside
                  remat's where the bytes differ
  engine          "jax VERSION (jaxlib VERSION)"; jax_version: VERSION
"""

import json
import math
import os
import re
import sys

# Beside this file in tools/: the program's parser, and this engine's parts.
from jax_engine_errors import ProgramError, Unsupported
from jax_engine_policy import CHECKPOINT_EVERY, checkpoint_every, jax_policy
from jax_engine_stats import peak_stats, residual_stats
from jax_philox import random_bits
from program_text import ParseError, parse_program

UNSUPPORTED_EXIT = 77
ERROR_EXIT = 1


# The attributes each op may carry besides "site" and "scope" (where it was
# traced, and its enclosing function: labels that change no arithmetic).
_ATTRS = {
    "name": {"name"},
    "layer_norm": {"scalar"},
    "scale": {"scalar"},
    "dropout": {"scalar", "ints"},
    "masked_fill": {"scalar"},
    "rms_norm": {"scalar"},
    "split_heads": {"ints"},
    "merge_heads": {"ints"},
    "reshape": {"ints"},
    "permute": {"ints"},
    "top_k_softmax": {"ints"},
    "conv2d": {"ints"},
    "conv2d_bias": {"ints"},
    "max_pool2d": {"ints"},
    "batch_norm": {"scalar"},
    "batch_norm_running_mean": {"scalar"},
    "batch_norm_running_var": {"scalar"},
    "state": {"name"},
    "slice": {"ints"},
    "sum": {"ints", "keepdim"},
    "mean": {"ints", "keepdim"},
    "amax": {"ints", "keepdim"},
    "pow": {"scalar"},
    "hardtanh": {"ints"},
    "expand": {"ints"},
    "cat": {"ints"},
    "select": {"ints"},
    "adaptive_avg_pool2d": {"ints"},
    "embedding": {"ints"},
    "cross_entropy": {"ints"},
    "checkpoint": {"name", "policy"},
    "scan": {"name", "schedule", "consts"},
    "chain": {"name", "schedule"},
}
_METADATA = {"site", "scope"}

# How many inputs each primitive op takes.
_ARITY = {
    "matmul": 2, "relu": 1, "sin": 1, "cos": 1, "square": 1, "add": 2, "mul": 2, "sum": 1,
    "name": 1, "softmax": 1, "layer_norm": 3, "gelu": 1, "scale": 1, "transpose": 1,
    "split_heads": 1, "merge_heads": 1, "bias_add": 2,
    "neg": 1, "sub": 2, "exp": 1, "log": 1, "silu": 1, "rms_norm": 2, "log_softmax": 1, "gelu_erf": 1,
    "dropout": 2, "embedding": 2, "masked_fill": 2, "cross_entropy": 2,
    "reshape": 1, "permute": 1, "top_k_softmax": 1,
    "conv2d": 2, "conv2d_bias": 3, "max_pool2d": 1, "global_avg_pool": 1, "batch_norm": 3,
    "batch_norm_running_mean": 2, "batch_norm_running_var": 2, "state": 1, "slice": 1,
    "div": 2, "rsqrt": 1, "sqrt": 1, "tanh": 1, "sigmoid": 1, "pow": 1, "hardtanh": 1, "where": 3,
    "mean": 1, "amax": 1,
    "expand": 1, "cat": 2, "select": 1, "adaptive_avg_pool2d": 1,
}

LAYER_NORM_EPS = 1e-5  # Kernels::kLayerNormEps
def configure_runtime(environ):
    """Sets, where the caller has not, what jax reads when it is imported:
    the CPU platform, and one thread for XLA's CPU kernels (remat's CI
    machines have 2 cores, shared with Bazel)."""
    environ.setdefault("JAX_PLATFORMS", "cpu")
    environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    environ.setdefault("OMP_NUM_THREADS", "1")


# ------------------------------------------------------------- the program

def _scalar_attr(op, at):
    if "scalar" not in op.attrs:
        raise ProgramError("%s: a %s op without its scalar=" % (at, op.kind))
    text = op.attrs["scalar"]
    try:
        return float(text)  # PrintProgram's %.17g forms, inf and nan included
    except ValueError:
        try:
            return float.fromhex(text)  # strtod's hex floats, which ParseProgram reads too
        except ValueError:
            raise ProgramError("%s: scalar=%r is not a number" % (at, text))


_SITE_SHIMS = {}  # (site, label) -> Builder._site_call's function


class Builder:
    """Turns a parsed program into a JAX function of its inputs.

    build() checks every op's attributes and resolves every policy before
    anything is traced, so that an Unsupported is raised before JAX runs."""

    def __init__(self, jax, program):
        self.jax = jax
        self.program = program
        self.offloads = False  # whether some region's policy offloads
        self._policies = {}    # id(op) -> the jax policy of a checkpoint op
        self._every = {}       # id(op) -> K of a checkpoint_every:K scan
        self._check_body(program, "program %s" % program.name)

    def _check_body(self, body, where):
        for op in body.ops:
            at = "%s: %%%s = %s" % (where, op.out, op.kind)
            if op.kind not in _ARITY and op.kind not in ("checkpoint", "scan", "chain"):
                raise Unsupported("%s: op %r (not an op of engines/api/program_text.h)" % (at, op.kind))
            extra = set(op.attrs) - _METADATA - _ATTRS.get(op.kind, set())
            if extra:
                raise Unsupported("%s: attribute(s) %s (not one this engine maps)"
                                  % (at, ", ".join(sorted(extra))))
            if op.kind in _ARITY and len(op.inputs) != _ARITY[op.kind]:
                raise ProgramError("%s: %d inputs, expected %d" % (at, len(op.inputs), _ARITY[op.kind]))
            if (op.body is None) != (op.kind not in ("checkpoint", "scan", "chain")):
                raise ProgramError("%s: %s" % (at, "a body on a primitive op" if op.body else "no body"))
            schedule = op.attrs.get("schedule", "")
            if op.kind == "scan" and schedule.startswith(CHECKPOINT_EVERY):
                self._every[id(op)] = checkpoint_every(schedule, at)
            elif op.kind == "chain" and schedule.startswith(CHECKPOINT_EVERY):
                raise ProgramError("%s: schedule %r: checkpoint_every:K is a scan's schedule, not a chain's "
                                   "(engines/api/program_text.cc)" % (at, schedule))
            elif op.kind in ("scan", "chain") and schedule:
                raise Unsupported("%s: schedule %r (remat's own schedule of a %s's steps; JAX has none "
                                  "to map it to)" % (at, schedule, op.kind))
            if op.kind == "checkpoint":
                policy, offloads = jax_policy(self.jax, op.attrs.get("policy", "nothing_saveable"), at)
                self._policies[id(op)] = policy
                self.offloads |= offloads
            if op.body is not None:
                self._check_body(op.body, at)

    def _check_ids(self, ids, bound, at):
        """ids outside [0, bound) are an error, as remat's kernels make them
        (JAX's gather would clamp them). Checked where the ids are concrete:
        the pre-pass run() makes with jit disabled."""
        import numpy as np
        if isinstance(ids, self.jax.core.Tracer):
            return
        a = np.asarray(ids)
        bad = np.nonzero((a < 0) | (a >= bound))[0] if a.ndim == 1 else np.nonzero(((a < 0) | (a >= bound)).ravel())[0]
        if bad.size:
            i = int(bad[0])
            raise ProgramError("%s: index %d at position %d is outside [0, %d)" % (at, int(a.ravel()[i]), i, bound))

    def function(self):
        """f(*inputs) -> (the loss, the new state {parameter name: value}),
        traceable by JAX."""
        return lambda *args: self._run(self.program, list(args), "program %s" % self.program.name)

    def _run(self, body, values, where, inline=False):
        """(The value of `body` on `values`, the new state its state ops give,
        by parameter name): a checkpoint region returns its state beside its
        output, as a function under jax.checkpoint returns auxiliary values,
        so the state comes from the forward pass whatever JAX recomputes.
        inline: its checkpoint regions (nested ones too) run as plain code,
        storing everything, as remat's engines run the steps a
        checkpoint_every:K scan does not checkpoint."""
        jnp = self.jax.numpy
        if len(values) != len(body.params):
            raise ProgramError("%s: called with %d values for %d parameters"
                               % (where, len(values), len(body.params)))
        env = {}
        for (pid, _, shape), v in zip(body.params, values):
            kind = "i32" if pid in body.int_params else "f32"
            if tuple(v.shape) != shape or (v.dtype == jnp.int32) != (kind == "i32"):
                raise ProgramError("%s: parameter %s is %s %s, declared %s%s"
                                   % (where, pid, v.dtype, tuple(v.shape), kind, list(shape)))
            env[pid] = v
        state = {}
        for op in body.ops:
            at = "%s: %%%s = %s" % (where, op.out, op.kind)
            try:
                x = [env[v] for v in op.inputs]
            except KeyError as e:
                raise ProgramError("%s: reads %%%s, which is not a value of this body" % (at, e.args[0]))
            shim = self._site_call(op)
            if op.kind in ("checkpoint", "scan", "chain"):
                y, inner = shim(self._op, (op, x, at, inline))
            else:
                y, inner = shim(self._op, (op, x, at, inline)), {}
            if op.kind == "state":
                name = op.attrs.get("name")
                if not name:
                    raise ProgramError("%s: a state op without its name=" % at)
                inner = {name: y}
            for name, v in inner.items():
                if name in state:
                    raise ProgramError("%s: parameter %r gets a new state twice" % (at, name))
                state[name] = v
            if op.type is not None and tuple(y.shape) != op.type:
                raise ProgramError("%s: gives %s, declared f32%s" % (at, tuple(y.shape), list(op.type)))
            if y.dtype != jnp.float32:
                raise ProgramError("%s: gives %s, not float32" % (at, y.dtype))
            env[op.out] = y
        if body.result not in env:
            raise ProgramError("%s: returns %%%s, which is not a value of this body" % (where, body.result))
        return env[body.result], state

    def _site_call(self, op):
        """A function (fn, args) -> fn(*args) whose frame stands at the op's
        site in the problem's source ("problems/layer_loss.cc:48") and is
        named after the op ("%5 relu"). JAX's saved_residuals names each
        residual by the innermost frame outside JAX, and this file is
        excluded from those (main() registers it), so a residual reads
        "output of gt from problems/layer_loss.cc:48 (%5 relu)": the same
        place remat's listing gives, which is what lets remat conform set
        the two listings side by side. An op without a readable site is
        called directly."""
        site = op.attrs.get("site", "")
        m = re.fullmatch(r"(.+):([0-9]+)", site)
        if not m or int(m.group(2)) < 3:
            return lambda fn, args: fn(*args)
        label = "%%%s %s" % (op.out, op.kind)
        key = (site, label)
        if key not in _SITE_SHIMS:
            # The call stands alone at column 0 of the site's line: JAX then
            # prints "file:line (label)", without a column the source lacks.
            line = int(m.group(2))
            text = "\n" * (line - 3) + "def shim(fn, args):\n return (\nfn(*args))\n"
            env = {}
            exec(compile(text, m.group(1), "exec"), env)
            shim = env["shim"]
            names = {"co_name": label}
            if hasattr(shim.__code__, "co_qualname"):  # Python >= 3.11 prints that one
                names["co_qualname"] = label
            shim.__code__ = shim.__code__.replace(**names)
            _SITE_SHIMS[key] = shim
        return _SITE_SHIMS[key]

    def _op(self, op, x, at, inline):
        jax = self.jax
        jnp = jax.numpy
        k = op.kind

        def need(cond, what):
            if not cond:
                raise ProgramError("%s: %s (inputs %s)" % (at, what, [tuple(t.shape) for t in x]))

        if k == "matmul":
            a, b = x
            need(a.ndim == b.ndim and a.ndim in (2, 3), "expected (m,k)x(k,n) or (B,m,k)x(B,k,n)")
            return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
        if k == "relu":
            return jax.nn.relu(x[0])
        if k == "sin":
            return jnp.sin(x[0])
        if k == "cos":
            return jnp.cos(x[0])
        if k == "square":
            return jnp.square(x[0])
        if k in ("add", "mul", "div"):  # numpy broadcasting, as remat's
            return x[0] + x[1] if k == "add" else x[0] * x[1] if k == "mul" else x[0] / x[1]
        if k in ("sum", "mean", "amax"):
            axes = tuple(int(i) for i in op.attrs.get("ints", [])) or None  # none: every axis
            f = {"sum": jnp.sum, "mean": jnp.mean, "amax": jnp.max}[k]  # jnp.max: ties split evenly
            return f(x[0], axis=axes, keepdims=op.attrs.get("keepdim", "0") == "1")
        if k in ("rsqrt", "sqrt", "tanh"):
            return getattr(jax.lax, k)(x[0])
        if k == "sigmoid":
            return jax.nn.sigmoid(x[0])
        if k == "pow":
            return jnp.power(x[0], jnp.float32(_scalar_attr(op, at)))
        if k == "hardtanh":
            lo, hi = (jnp.float32(int(i)) for i in op.attrs["ints"])
            # The gradient strictly inside (lo, hi) only, as remat's (jnp.clip's
            # would give half at a bound).
            inside = (x[0] > lo) & (x[0] < hi)
            return jnp.where(inside, x[0], jax.lax.stop_gradient(jnp.clip(x[0], lo, hi)))
        if k == "where":
            return jnp.where(x[0] != 0, x[1], x[2])
        if k == "name":
            label = op.attrs.get("name")
            need(label, "a name op without its name=")
            return jax.ad_checkpoint.checkpoint_name(x[0], label)
        if k == "softmax":
            need(x[0].ndim >= 1, "softmax of a scalar")
            return jax.nn.softmax(x[0], axis=-1)
        if k == "layer_norm":
            v, gamma, beta = x
            need(v.ndim >= 1 and gamma.shape == beta.shape == v.shape[-1:], "expected x (..., C), gamma and beta (C)")
            mean = jnp.mean(v, axis=-1, keepdims=True)
            centered = v - mean
            var = jnp.mean(jnp.square(centered), axis=-1, keepdims=True)
            eps = _scalar_attr(op, at) if "scalar" in op.attrs else LAYER_NORM_EPS
            return centered * jax.lax.rsqrt(var + jnp.float32(eps)) * gamma + beta
        if k == "gelu":
            return jax.nn.gelu(x[0], approximate=True)
        if k == "scale":
            return x[0] * jnp.float32(_scalar_attr(op, at))  # c rounded to f32, as Kernels::Scale
        if k == "neg":
            return -x[0]
        if k == "sub":
            return x[0] - x[1]
        if k == "exp":
            return jnp.exp(x[0])
        if k == "log":
            return jnp.log(x[0])
        if k == "silu":
            return jax.nn.silu(x[0])
        if k == "log_softmax":
            need(x[0].ndim >= 1, "log_softmax of a scalar")
            return jax.nn.log_softmax(x[0], axis=-1)
        if k == "gelu_erf":
            return jax.nn.gelu(x[0], approximate=False)
        if k == "rms_norm":
            v, gamma = x
            eps = _scalar_attr(op, at)
            need(v.ndim >= 1 and gamma.shape == v.shape[-1:] and eps > 0,
                 "expected x (..., C), gamma (C) and eps > 0 (eps %r)" % eps)
            ms = jnp.mean(jnp.square(v), axis=-1, keepdims=True)
            return v * jax.lax.rsqrt(ms + jnp.float32(eps)) * gamma
        if k == "dropout":
            v, seed = x
            p = _scalar_attr(op, at)
            ints = op.attrs.get("ints", [])
            need(len(ints) == 1 and 0 <= p < 1 and seed.ndim == 0 and seed.dtype == jnp.int32,
                 "dropout needs ints=[key], 0 <= p < 1 and an i32 scalar seed")
            # engines/api/philox.h: keep element i when its bits >= floor(p 2^32),
            # scaled by float32(1 / (1 - p)); the bits a function of (seed, key, i)
            # only, so that a recomputation draws the forward's.
            bits = random_bits(jax, seed, ints[0], v.size).reshape(v.shape)
            threshold = int(math.floor(math.ldexp(p, 32)))
            keep = bits >= jnp.uint32(threshold)
            return jnp.where(keep, v * jnp.float32(1.0 / (1.0 - p)), jnp.float32(0))
        if k == "embedding":
            table, ids = x
            pad = [int(i) for i in op.attrs.get("ints", [])]
            need(table.ndim == 2 and ids.dtype == jnp.int32, "expected a (V, D) table and i32 ids")
            need(len(pad) <= 1 and all(0 <= p < table.shape[0] for p in pad),
                 "embedding's ints=%s: expected [padding_idx] within the table's %d rows" % (pad, table.shape[0]))
            self._check_ids(ids, table.shape[0], at)
            if pad:  # padding_idx: its row read as a constant, so its gradient is zero
                table = table.at[pad[0]].set(jax.lax.stop_gradient(table[pad[0]]))
            return jnp.take(table, ids, axis=0)
        if k == "masked_fill":
            v, mask = x
            need(mask.shape == v.shape and mask.dtype == jnp.int32, "expected an i32 mask of x's shape")
            return jnp.where(mask != 0, jnp.float32(_scalar_attr(op, at)), v)
        if k == "cross_entropy":
            logits, targets = x
            need(logits.ndim == 2 and targets.shape == logits.shape[:1] and targets.dtype == jnp.int32,
                 "expected logits (N, C) and i32 targets (N)")
            ignore = [int(i) for i in op.attrs.get("ints", [])]
            need(len(ignore) <= 1, "cross_entropy's ints=%s: expected [ignore_index] or none" % ignore)
            if ignore:
                keep = targets != ignore[0]
                self._check_ids(jnp.where(keep, targets, 0), logits.shape[1], at)
                targets = jnp.where(keep, targets, 0)
            else:
                self._check_ids(targets, logits.shape[1], at)
            lse = jax.nn.logsumexp(logits, axis=-1)
            picked = jnp.take_along_axis(logits, targets[:, None], axis=-1)[:, 0]
            if not ignore:
                return jnp.mean(lse - picked)
            # The mean over the K rows kept (K = 0: 0/0, nan; where's gradient
            # selects, so the ignored rows' is 0, not 0 * inf).
            return jnp.sum(jnp.where(keep, lse - picked, 0)) / jnp.sum(keep).astype(jnp.float32)
        if k == "reshape":
            dims = [int(d) for d in op.attrs.get("ints", [])]
            need(all(d >= 0 for d in dims) and math.prod(dims) == x[0].size,
                 "reshape to %s keeps the element count" % dims)
            return jnp.reshape(x[0], dims)
        if k == "permute":
            perm = [int(d) for d in op.attrs.get("ints", [])]
            need(sorted(perm) == list(range(x[0].ndim)), "permute by %s: not a permutation of the axes" % perm)
            return jnp.transpose(x[0], perm)
        if k in ("conv2d", "conv2d_bias"):
            v, w = x[0], x[1]
            ints = [int(i) for i in op.attrs.get("ints", [])]
            if len(ints) == 2:
                ints = [ints[0], ints[0], ints[1], ints[1], 1, 1, 1]
            need(len(ints) == 7 and v.ndim == 4 and w.ndim == 4 and v.shape[1] == w.shape[1] * ints[6],
                 "conv2d needs ints=[stride,padding] or [sh,sw,ph,pw,dh,dw,groups], x (N,C,H,W), w (O,C/groups,KH,KW)")
            sh, sw, ph, pw, dh, dw, groups = ints
            y = jax.lax.conv_general_dilated(v, w, window_strides=(sh, sw), padding=[(ph, ph), (pw, pw)],
                                             rhs_dilation=(dh, dw), feature_group_count=groups,
                                             dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                             precision=jax.lax.Precision.HIGHEST)
            return y + x[2][None, :, None, None] if k == "conv2d_bias" else y
        if k == "max_pool2d":
            ints = [int(i) for i in op.attrs.get("ints", [])]
            need(len(ints) == 3 and x[0].ndim == 4, "max_pool2d needs ints=[kernel,stride,padding] and x (N,C,H,W)")
            kk, s, p = ints
            return jax.lax.reduce_window(x[0], -jnp.inf, jax.lax.max, (1, 1, kk, kk), (1, 1, s, s),
                                         [(0, 0), (0, 0), (p, p), (p, p)])
        if k == "adaptive_avg_pool2d":
            ints = [int(i) for i in op.attrs.get("ints", [])]
            need(len(ints) == 2 and x[0].ndim == 4 and min(ints) >= 1 and min(x[0].shape[2:]) >= 1,
                 "adaptive_avg_pool2d needs ints=[OH,OW], OH, OW >= 1, and x (N,C,H,W), H, W >= 1")
            (h, w), (oh, ow) = x[0].shape[2:], ints
            # PyTorch's windows: rows floor(i H / OH) .. ceil((i + 1) H / OH) - 1
            # (OH > H repeats rows).
            rows = [jnp.stack([jnp.mean(x[0][:, :, i * h // oh:-(-(i + 1) * h // oh), j * w // ow:-(-(j + 1) * w // ow)],
                                        axis=(2, 3)) for j in range(ow)], axis=-1) for i in range(oh)]
            return jnp.stack(rows, axis=-2)
        if k == "global_avg_pool":
            need(x[0].ndim == 4, "global_avg_pool of x (N,C,H,W)")
            return jnp.mean(x[0], axis=(2, 3))
        if k == "batch_norm":
            v, gamma, beta = x
            eps = _scalar_attr(op, at)
            need(v.ndim in (2, 4) and gamma.shape == beta.shape == v.shape[1:2] and eps > 0,
                 "batch_norm needs x (N,C) or (N,C,H,W), gamma and beta (C), eps > 0")
            axes = (0,) if v.ndim == 2 else (0, 2, 3)
            shape = (1, -1) if v.ndim == 2 else (1, -1, 1, 1)
            mean = jnp.mean(v, axis=axes, keepdims=True)
            var = jnp.mean(jnp.square(v - mean), axis=axes, keepdims=True)
            return ((v - mean) * jax.lax.rsqrt(var + jnp.float32(eps)) * gamma.reshape(shape)
                    + beta.reshape(shape))
        if k == "top_k_softmax":
            ints = op.attrs.get("ints", [])
            need(len(ints) == 1 and x[0].ndim >= 1 and 1 <= int(ints[0]) <= x[0].shape[-1],
                 "top_k_softmax needs ints=[k], 1 <= k <= the last axis")
            values, index = jax.lax.top_k(x[0], int(ints[0]))
            weights = jax.nn.softmax(values, axis=-1)
            onehot = jax.nn.one_hot(index, x[0].shape[-1], dtype=x[0].dtype)
            return jnp.sum(onehot * weights[..., None], axis=-2)
        if k == "transpose":
            need(x[0].ndim in (2, 3), "transpose of a rank-2 or rank-3 tensor")
            return jnp.swapaxes(x[0], -1, -2)
        if k == "bias_add":
            need(x[0].ndim >= 1 and x[1].shape == x[0].shape[-1:], "expected x (..., C), b (C)")
            return x[0] + x[1]
        if k == "split_heads":
            ints = op.attrs.get("ints", [])
            need(len(ints) == 2, "split_heads needs ints=[B,H]")
            batch, heads = ints
            need(x[0].ndim == 2 and batch > 0 and heads > 0 and x[0].shape[0] % batch == 0
                 and x[0].shape[1] % heads == 0, "expected (B*S, D) with H dividing D, B=%d H=%d" % (batch, heads))
            rows, d = x[0].shape
            s, dh = rows // batch, d // heads
            # out[b*H + h, s, j] = x[b*S + s, h*Dh + j]
            return x[0].reshape(batch, s, heads, dh).transpose(0, 2, 1, 3).reshape(batch * heads, s, dh)
        if k == "merge_heads":
            ints = op.attrs.get("ints", [])
            need(len(ints) == 1, "merge_heads needs ints=[B]")
            (batch,) = ints
            need(x[0].ndim == 3 and batch > 0 and x[0].shape[0] % batch == 0, "expected (B*H, S, Dh), B=%d" % batch)
            bh, s, dh = x[0].shape
            heads = bh // batch
            return x[0].reshape(batch, heads, s, dh).transpose(0, 2, 1, 3).reshape(batch * s, heads * dh)
        if k == "state":
            return x[0]
        if k in ("slice", "select"):
            ints = [int(i) for i in op.attrs.get("ints", [])]
            if k == "select":
                need(len(ints) == 2, "select needs ints=[axis,index]")
                ints = ints + [1]
            need(len(ints) in (3, 4), "slice needs ints=[axis,start,length] or [axis,start,length,step]")
            axis, start, length = ints[:3]
            step = ints[3] if len(ints) == 4 else 1
            need(0 <= axis < x[0].ndim and start >= 0 and length >= 0 and step >= 1
                 and (start <= x[0].shape[axis] if length == 0 else start + (length - 1) * step < x[0].shape[axis]),
                 "%s's ints %s are not within x" % (k, ints))
            y = jax.lax.slice_in_dim(x[0], start, start + (length - 1) * step + 1 if length else start, step, axis)
            return jnp.squeeze(y, axis) if k == "select" else y
        if k == "expand":
            dims = [int(d) for d in op.attrs.get("ints", [])]
            try:
                return jnp.broadcast_to(x[0], dims)
            except ValueError as e:
                raise ProgramError("%s: expand to %s: %s" % (at, dims, e))
        if k == "cat":
            ints = [int(i) for i in op.attrs.get("ints", [])]
            need(len(ints) == 1 and x[0].ndim == x[1].ndim and 0 <= ints[0] < x[0].ndim,
                 "cat needs ints=[axis] and operands of one rank")
            return jnp.concatenate([x[0], x[1]], axis=ints[0])
        if k in ("batch_norm_running_mean", "batch_norm_running_var"):
            v, running = x
            need(v.ndim in (2, 4) and running.shape == (v.shape[1],) and v.size // max(1, v.shape[1]) >= 2,
                 "expected x (N, C) or (N, C, H, W) with N H W >= 2 and a running statistic (C)")
            m = _scalar_attr(op, at)
            need(0 <= m <= 1, "a momentum in [0, 1]")
            axes = (0,) if v.ndim == 2 else (0, 2, 3)
            stat = jnp.mean(v, axis=axes) if k.endswith("mean") else jnp.var(v, axis=axes, ddof=1)
            return jnp.float32(1 - m) * running + jnp.float32(m) * stat
        if k == "checkpoint":
            body = op.body
            if inline:
                return self._run(body, x, at, inline=True)
            fn = jax.checkpoint(lambda *a: self._run(body, list(a), at), policy=self._policies[id(op)])
            return fn(*x)
        if k == "scan":
            # consts=M: the last M inputs are loop invariants every step
            # sees whole (integers; what a lax.scan body closes over).
            num_consts = int(op.attrs.get("consts", 0))
            need(len(x) >= 2 + num_consts, "a scan needs a carry, at least one xs and its %d consts" % num_consts)
            consts = list(x[len(x) - num_consts:])
            x = x[:len(x) - num_consts]
            length = x[1].shape[0] if x[1].ndim else -1
            need(all(t.ndim >= 1 and t.shape[0] == length for t in x[1:]), "xs with different leading axes")
            body = op.body
            every = self._every.get(id(op), 0)
            carry, xs = x[0], tuple(x[1:])
            def no_state(out_state):
                out, state = out_state
                if state:
                    raise ProgramError("%s: a state op inside a scan's body (parameter %r would be updated "
                                       "once per step)" % (at, sorted(state)[0]))
                return out

            if every == 0 or inline:
                def step(c, xs_i):
                    return no_state(self._run(body, [c] + list(xs_i) + consts, at, inline)), None

                return jax.lax.scan(step, carry, xs)[0], {}
            # checkpoint_every:K: step i runs as written (its regions
            # honoured) when (i + 1) % K == 0, inline otherwise: one
            # lax.scan over the L // K groups of K steps, then one over the
            # L % K steps left (none of them checkpointed).
            groups, left = divmod(length, every)

            def group(c, xs_g):
                for j in range(every):
                    c = no_state(self._run(body, [c] + [t[j] for t in xs_g] + consts, at,
                                           inline=(j + 1) % every != 0))
                return c, None

            def tail(c, xs_i):
                return no_state(self._run(body, [c] + list(xs_i) + consts, at, inline=True)), None

            if groups:
                grouped = tuple(t[:groups * every].reshape((groups, every) + t.shape[1:]) for t in xs)
                carry = jax.lax.scan(group, carry, grouped)[0]
            if left:
                carry = jax.lax.scan(tail, carry, tuple(t[groups * every:] for t in xs))[0]
            return carry, {}
        if k == "chain":
            # The body's ops are the blocks, each a checkpoint op: running the
            # body runs them in order, each under its own policy.
            for block in op.body.ops:
                if block.kind != "checkpoint":
                    raise ProgramError("%s: block %%%s is a %s, not a checkpoint" % (at, block.out, block.kind))
            return self._run(op.body, x, at, inline)
        raise Unsupported("%s: op %r" % (at, k))


# --------------------------------------------------------------------- main

def run(d):
    import numpy as np
    try:
        import jax
        import jax.ad_checkpoint  # checkpoint_name: `import jax` alone does not load it
        import jaxlib
    except ImportError as e:
        print("unsupported: JAX is not installed (%s; tools/python_env.sh makes .venv with it)" % e)
        return UNSUPPORTED_EXIT
    jax.config.update("jax_enable_x64", False)
    jax.config.update("jax_default_matmul_precision", "highest")
    try:  # residuals named by the ops' sites, not by this file (Builder._site_call)
        from jax._src import source_info_util
        source_info_util.register_exclusion(os.path.abspath(__file__))
    except (ImportError, AttributeError):
        pass  # the listing then names this file's lines; the bytes are unchanged
    with open(os.path.join(d, "program.txt")) as f:
        program = parse_program(f.read())
    names = [name for _, name, _ in program.params]
    wrt = list(names)
    if os.path.exists(os.path.join(d, "case.json")):
        with open(os.path.join(d, "case.json")) as f:
            wrt = json.load(f).get("wrt", wrt)
    for n in wrt:
        if n not in names:
            raise ProgramError("case.json: wrt names %r, which is not a parameter (%s)" % (n, ", ".join(names)))
    args = []
    for pid, name, shape in program.params:
        a = np.load(os.path.join(d, name + ".npy"))
        want = np.int32 if pid in program.int_params else np.float32
        if a.dtype != want or tuple(a.shape) != shape:
            raise ProgramError("%s.npy is %s %s, the program says %s %s" % (name, a.dtype, a.shape, np.dtype(want).name, shape))
        args.append(jax.numpy.asarray(a))
    for n in wrt:
        if program.params[names.index(n)][0] in program.int_params:
            raise ProgramError("case.json: wrt names %r, an integer input (integers are never differentiated)" % n)
    wrt_idx = tuple(names.index(n) for n in wrt)

    builder = Builder(jax, program)  # raises Unsupported before anything runs
    f_and_state = builder.function()

    def f(*a):
        return f_and_state(*a)[0]

    if program.int_params:
        # Ids and targets checked where they are concrete: one run op by op.
        with jax.disable_jit():
            f(*args)
    shape = jax.eval_shape(f, *args)
    if shape.shape != () or shape.dtype != jax.numpy.float32:
        raise ProgramError("program %s returns %s %s, not a float32 scalar" % (program.name, shape.dtype, shape.shape))

    wrt_set = set(wrt_idx)
    fixed_idx = tuple(i for i in range(len(args)) if i not in wrt_set)

    def forward(w, fixed):
        """jax.vjp of f in the wrt inputs `w`, the `fixed` ones held, with the
        new state as its auxiliary output."""
        def of_wrt(*w_):
            a = [None] * len(args)
            for i, v in zip(wrt_idx, w_):
                a[i] = v
            for i, v in zip(fixed_idx, fixed):
                a[i] = v
            return f_and_state(*a)
        return jax.vjp(of_wrt, *w, has_aux=True)

    w = tuple(args[i] for i in wrt_idx)
    fixed = tuple(args[i] for i in fixed_idx)
    try:
        fwd = jax.jit(forward).lower(w, fixed).compile()
        loss, pullback, state = fwd(w, fixed)
        bwd = jax.jit(lambda p: p(jax.numpy.ones((), jax.numpy.float32))).lower(pullback).compile()
    except Exception as e:  # noqa: BLE001 - re-raised unless an offload policy is the likely cause
        if not builder.offloads:
            raise
        print("unsupported: an offload policy (device -> pinned_host) that JAX %s cannot compile on CPU: %s"
              % (jax.__version__, str(e).splitlines()[0] if str(e) else type(e).__name__))
        return UNSUPPORTED_EXIT
    grads = bwd(pullback)
    residual, host_residual, listing = residual_stats(jax, f, args, wrt_idx)
    fwd_peak, fwd_fields = peak_stats(fwd)
    bwd_peak, bwd_fields = peak_stats(bwd)
    peak = max(fwd_peak, bwd_peak)

    np.save(os.path.join(d, "loss.npy"), np.asarray(loss, dtype=np.float32))
    for n, g in zip(wrt, grads):
        np.save(os.path.join(d, "grad_%s.npy" % n), np.asarray(g, dtype=np.float32))
    for n, v in state.items():
        np.save(os.path.join(d, "state_%s.npy" % n), np.asarray(v, dtype=np.float32))
    with open(os.path.join(d, "stats.json"), "w") as out:
        json.dump({"engine": "jax %s (jaxlib %s)" % (jax.__version__, jaxlib.__version__),
                   "jax_version": jax.__version__,
                   "residual_bytes": residual,
                   "host_residual_bytes": host_residual,
                   "peak_bytes": peak,
                   "forward_peak_bytes": fwd_peak,
                   "backward_peak_bytes": bwd_peak,
                   "memory_analysis": {"forward": fwd_fields, "backward": bwd_fields},
                   "residuals": listing}, out, indent=1)
    return 0


def main(argv):
    if len(argv) != 2:
        print("usage: jax_engine.py DIR", file=sys.stderr)
        return 2
    configure_runtime(os.environ)
    try:
        return run(argv[1])
    except Unsupported as e:
        print("unsupported: %s" % e)
        return UNSUPPORTED_EXIT
    except (ParseError, ProgramError, OSError, ValueError) as e:
        print("jax_engine: %s: %s" % (argv[1], e), file=sys.stderr)
        return ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv))
