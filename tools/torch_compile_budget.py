#!/usr/bin/env python3
"""torch.compile's activation_memory_budget against remat's memory_budget:B.

    .venv/bin/python tools/torch_compile_budget.py [--remat bazel-bin/tools/remat]
        [--problems layer_loss,dot_policy,mlp_chain,gpt,moe,resnet]
        [--budgets 0,0.25,0.5,0.75,1] [--param problem:NAME=VALUE ...] > FILE.tsv

Both sides plan the same function: the problem at its default (bench) size
with every checkpoint region inlined (`remat program --inline`: the model
with no checkpoint calls, as torch.compile sees it), and the same budget B,
a fraction with one meaning on both sides: 0 recomputes everything that can
be recomputed, 1 saves what no checkpointing would.

  torch   AOTAutograd (`aot_function`, the front end torch.compile runs)
          with the min-cut rematerialization partitioner, the one inductor
          uses, under torch._functorch.config.activation_memory_budget = B
          (knapsack solver, FLOP-based runtime estimate: PyTorch's defaults).
          The compilers return the partitioned graphs as they are, so the
          plan is inductor's and the arithmetic eager's.
          saved bytes: the tensors the forward graph hands to the backward
            (its outputs after the loss), the graph's inputs and views of
            them excluded, a view of a saved value counted as that value;
            the dropout masks (given to the traced function as inputs, as
            a traced seed has no value to draw from) count when saved, in
            their own column too: PyTorch's dropout saves its mask, remat's
            its seed;
          recomputed FLOPs: FlopCounterMode's count over the compiled
            forward and backward, less its count over eager autograd's
            (FlopCounterMode counts matmuls and convolutions).
  remat   `remat run --engine recompute --policy memory_budget:B` on the
          same program (one region around all of it; engines/budget's
          planner, proven optimal where the plan says so).
          saved bytes: residual_bytes;
          recomputed FLOPs: matmul and conv2d FLOPs only, to count what
            FlopCounterMode counts (op_runs beyond eager's, times the op's
            2mkn or 2 N O Ho Wo C kh kw), and, in its own column, every
            op's (remat's FLOP model).

One line per (problem, B), tab-separated, after a header. The fraction B
means the same on both sides but not the same bytes: each side's B = 1 is
what its own op rules save (PyTorch's relu saves its output, remat's its
input, as JAX's), so the planners are compared at one memory size too:
remat under memory_budget:<torch's saved bytes less its masks>B, the least
it recomputes within the bytes torch.compile gave activations. Columns "verdict" (at the same B, the two
plans as points (saved bytes, recomputed matmul FLOPs): "remat better" when
remat's is no worse in both and better in one, "torch better" the other
way, "equal", or "trade-off") and "verdict_at_torch_bytes" (who recomputes
fewer FLOPs within torch's bytes, and by how much). Problems with a scan are
left out: remat's planner treats a scan inside a region as one op, while
torch unrolls the loop, so the two would not plan the same graph.

Inputs come from `remat run --problem P --dump DIR` (integer ids and
targets included), so both sides compute on the same numbers; the losses
are compared (a disagreement stops the run).
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from program_text import parse_program  # noqa: E402
import torch_engine  # noqa: E402

DEFAULT_PROBLEMS = "layer_loss,dot_policy,mlp_chain,gpt,moe,resnet"
DEFAULT_BUDGETS = "0,0.25,0.5,0.75,1"
COLUMNS = ["problem", "size", "budget", "torch_saved_bytes", "torch_saved_mask_bytes", "torch_recomputed_flops", "torch_max_saved_bytes",
           "remat_saved_bytes", "remat_recomputed_flops", "remat_recomputed_flops_all_ops",
           "remat_max_saved_bytes", "remat_plan", "verdict",
           "remat_saved_bytes_at_torch_bytes", "remat_recomputed_flops_at_torch_bytes", "remat_plan_at_torch_bytes",
           "verdict_at_torch_bytes"]


class ReplayedMasks(torch_engine.Interpreter):
    """Draws the dropout masks once, eagerly (a traced seed has no value to
    draw from); then the function takes them as extra inputs, in the order
    the program draws them. What PyTorch's own dropout saves is its bool
    mask, so a mask the backward is handed counts as saved bytes."""

    def __init__(self, torch, np, program):
        super().__init__(torch, np, program)
        self.masks, self.given = [], None

    def dropout_keep(self, seed, key, shape, p):
        if self.given is None:
            keep = super().dropout_keep(seed, key, shape, p)
            self.masks.append(keep)
            return keep
        return self.given.pop(0)


def remat(remat_bin, args):
    r = subprocess.run([remat_bin] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("remat %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def op_flops(op, shapes):
    """FlopCounterMode's FLOPs of one forward run of op (matmul, conv2d), else 0."""
    if op.kind == "matmul":
        a, b = shapes[op.inputs[0]], shapes[op.inputs[1]]
        return 2 * math.prod(a) * b[-1]
    if op.kind == "conv2d":
        out, w = op.type, shapes[op.inputs[1]]
        return 2 * math.prod(out) * math.prod(w[1:])
    return 0


def flops_by_key(program):
    """{op_runs key: FLOPs of one run} for the matmul and conv2d ops; a key
    two ops of different FLOPs share maps to None (not attributable)."""
    shapes = {pid: shape for pid, _, shape in program.params}
    out = {}
    for op in program.ops:
        if op.type is not None:
            shapes[op.out] = op.type
        if op.body is not None:
            raise SystemExit("%s: %s inside the inlined program (a scan or a chain): not compared"
                             % (program.name, op.kind))
        f = op_flops(op, shapes)
        if f == 0:
            continue
        key = "%s at %s" % (op.kind, op.attrs.get("site", "?"))
        if op.attrs.get("scope"):
            key += " (%s)" % op.attrs["scope"]
        out[key] = f if out.get(key, f) == f else None
    return out


def remat_side(remat_bin, path, inputs, budget, keyed, eager_runs):
    j = json.loads(remat(remat_bin, ["run", "--program", path, "--inputs", inputs, "--engine", "recompute",
                                     "--policy", "memory_budget:%s" % budget, "--json"]))
    s = j["stats"]
    matmul = 0
    for key, runs in s["op_runs"].items():
        extra = runs - eager_runs.get(key, 0)
        if extra and key in keyed:
            if keyed[key] is None:
                raise SystemExit("%s: ops of different FLOPs share %r: cannot attribute" % (path, key))
            matmul += extra * keyed[key]
    plans = j.get("memory_budget_plans", [])
    plan = plans[0].split("; ")[-1] if plans else "-"
    everything = None
    if plans:
        words = plans[0].split(" of the ")[1].split()
        everything = int(words[0])
    return s["residual_bytes"], matmul, s["flops_recomputed"], everything, plan, j["loss"]


def torch_side(torch, np, program, args, wrt_index, budget):
    import torch._functorch.config as fconfig
    from functorch.compile import aot_function, make_boxed_func, min_cut_rematerialization_partition
    from torch.utils.flop_counter import FlopCounterMode

    interp = ReplayedMasks(torch, np, program)
    n = len(args)

    def fn(*a):
        interp.given = list(a[n:])
        return interp.run(program, list(a[:n]), "program %s" % program.name)

    def grads(f, masks):
        loss = f(*(list(args) + masks))
        torch.autograd.grad(loss, [args[i] for i in wrt_index], allow_unused=True)
        return loss

    with torch.no_grad():
        interp.run(program, list(args), "program %s" % program.name)  # draws the masks
    with FlopCounterMode(display=False) as eager_count:
        eager_loss = grads(fn, interp.masks)
    masks = interp.masks
    graphs = {}

    def keep(name):
        def compiler(gm, example_inputs):
            graphs[name] = gm
            return make_boxed_func(gm.forward)
        return compiler

    saved_budget = fconfig.activation_memory_budget
    fconfig.activation_memory_budget = float(budget)
    try:
        compiled = aot_function(fn, fw_compiler=keep("fw"), bw_compiler=keep("bw"),
                                partition_fn=min_cut_rematerialization_partition)
        grads(compiled, masks)  # traces, partitions and compiles both graphs
        with FlopCounterMode(display=False) as compiled_count:
            loss = grads(compiled, masks)
    finally:
        fconfig.activation_memory_budget = saved_budget
    if abs(loss.item() - eager_loss.item()) > 1e-4 * max(1.0, abs(eager_loss.item())):
        raise SystemExit("%s: compiled loss %r, eager %r" % (program.name, loss.item(), eager_loss.item()))
    fw = graphs["fw"]
    output = next(n for n in fw.graph.nodes if n.op == "output")
    outs = output.args[0]
    saved, mask_bytes, seen = 0, 0, set()
    for node in outs[1:]:  # the loss, then what the backward is handed
        if not hasattr(node, "op"):
            continue  # a saved size (a SymInt), not a tensor
        # A view (a weight's transpose) holds its base's storage: counted as
        # the base, once; a view of an input, like an input, not at all.
        base = node
        while base.op == "call_function" and getattr(base.target, "is_view", False) and base.args:
            base = base.args[0]
        if base in seen:
            continue
        if base.op == "placeholder" and list(fw.graph.nodes).index(base) < n:
            continue  # an input of the program (a mask, after them, is saved)
        seen.add(base)
        val = base.meta.get("val")
        if isinstance(val, torch.Tensor):
            saved += val.numel() * val.element_size()
            if base.op == "placeholder":
                mask_bytes += val.numel() * val.element_size()
    recomputed = compiled_count.get_total_flops() - eager_count.get_total_flops()
    return saved, mask_bytes, recomputed, eager_loss.item()


def verdict(torch_point, remat_point):
    (tb, tf), (rb, rf) = torch_point, remat_point
    if (tb, tf) == (rb, rf):
        return "equal"
    if rb <= tb and rf <= tf:
        return "remat better"
    if tb <= rb and tf <= rf:
        return "torch better"
    return "trade-off"


def at_bytes(torch_flops, remat_flops):
    """The verdict at torch's saved bytes: who recomputes fewer FLOPs, by how much."""
    if torch_flops == remat_flops:
        return "equal"
    better = "remat" if remat_flops < torch_flops else "torch"
    worse = max(torch_flops, remat_flops)
    return "%s better by %d FLOPs (%.1f%%)" % (better, abs(torch_flops - remat_flops),
                                                100.0 * abs(torch_flops - remat_flops) / worse)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--remat", default=os.path.join(HERE, "..", "bazel-bin", "tools", "remat"))
    parser.add_argument("--problems", default=DEFAULT_PROBLEMS)
    parser.add_argument("--budgets", default=DEFAULT_BUDGETS)
    parser.add_argument("--param", action="append", default=[],
                        help="PROBLEM:NAME=VALUE, a size other than the default")
    o = parser.parse_args(argv[1:])
    import numpy as np
    import torch
    torch.manual_seed(0)
    print("# torch %s; tools/torch_compile_budget.py --problems %s --budgets %s%s"
          % (torch.__version__, o.problems, o.budgets, "".join(" --param " + p for p in o.param)))
    print("\t".join(COLUMNS))
    for problem in o.problems.split(","):
        params = []
        for p in o.param:
            name, _, kv = p.partition(":")
            if name == problem:
                params += ["--param", kv]
        d = tempfile.mkdtemp(prefix="compile_budget.")
        text = remat(o.remat, ["program", "--problem", problem, "--inline"] + params)
        size = text.split("\n", 1)[0].lstrip("# ").replace(problem, "", 1).replace("--inline", "").strip()
        # Each op's site made its own ("... #v12"): op_runs counts runs by
        # site, and a loop's ops share one (mlp_chain's layers).
        text = re.sub(r'^(\s*%([A-Za-z0-9_.]+)\b.*@ ")([^"]*)"', lambda m: '%s%s #%s"' % (m.group(1), m.group(3), m.group(2)),
                      text, flags=re.M)
        path = os.path.join(d, "program.txt")
        with open(path, "w") as f:
            f.write(text)
        remat(o.remat, ["run", "--problem", problem, "--engine", "eager", "--dump", d] + params)
        program = parse_program(text)
        keyed = flops_by_key(program)
        eager = json.loads(remat(o.remat, ["run", "--program", path, "--inputs", d, "--engine", "eager", "--json"]))
        eager_runs = eager["stats"]["op_runs"]
        wrt = eager["wrt"]
        arrays = [np.load(os.path.join(d, name + ".npy")) for _, name, _ in program.params]
        args = torch_engine.torch_arguments(torch, np, program, arrays, wrt)
        wrt_index = [i for i, (_, name, _) in enumerate(program.params) if name in wrt]
        torch_max = None
        rows = []
        for budget in sorted(o.budgets.split(","), key=float, reverse=True):
            tb, tmask, tf, tloss = torch_side(torch, np, program, args, wrt_index, budget)
            rb, rf, rf_all, r_max, plan, rloss = remat_side(o.remat, path, d, budget, keyed, eager_runs)
            if abs(tloss - rloss) > 1e-3 * max(1.0, abs(rloss)):
                raise SystemExit("%s: PyTorch's loss %r, remat's %r: not the same function" % (problem, tloss, rloss))
            if torch_max is None:
                torch_max = tb  # B = 1 runs first
            # remat planning for the bytes torch.compile gave activations
            # (its saved bytes less the dropout masks, which remat redraws
            # from the seed): the two planners at one memory size.
            activations = tb - tmask
            rb2, rf2, _, _, plan2, _ = remat_side(o.remat, path, d, "%dB" % activations if activations > 0 else "0",
                                                  keyed, eager_runs)
            rows.append([problem, size, budget, tb, tmask, tf, torch_max, rb, rf, rf_all, r_max, plan,
                         verdict((tb, tf), (rb, rf)), rb2, rf2, plan2, at_bytes(tf, rf2)])
        for row in sorted(rows, key=lambda r: float(r[2])):
            print("\t".join(str(v) for v in row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
