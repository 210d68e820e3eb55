#!/usr/bin/env python3
"""A PyTorch engine for remat programs: `remat conform --engine-cmd` runs it.

    tools/torch_engine.py DIR

DIR holds program.txt (engines/api/program_text.h's format), one <input>.npy
per parameter and case.json ({"wrt": [names]}; without it, every input). The
engine interprets the program on PyTorch (float32, CPU, autograd) and writes
DIR/loss.npy, DIR/grad_<input>.npy for each name in wrt, and DIR/stats.json
with residual_bytes: the bytes PyTorch keeps for the backward pass, counted
with torch.autograd.graph.saved_tensors_hooks (each storage once, the inputs
excluded, as remat counts), plus the inputs each checkpoint region holds
(torch.utils.checkpoint keeps its arguments, not through the hooks).

What PyTorch can express, it runs; the rest it refuses with "unsupported: WHY"
on stdout and exit status 77 (tools/conform.h's kUnsupportedExit):
  checkpoint policy="nothing_saveable"     torch.utils.checkpoint.checkpoint(fn, use_reentrant=False)
  checkpoint policy="everything_saveable"  fn run inline (stores everything)
  other policies (dots_saveable, names)    unsupported: torch 1.13 has no selective checkpointing
  scan without a schedule                  a Python loop over the steps
  scan or chain with a schedule            unsupported (no PyTorch equivalent of remat's schedules)
  chain without a schedule                 its blocks in order
No torch: the message "unsupported: PyTorch is not installed" and exit 77.
"""

import json
import os
import sys

from program_text import ParseError, parse_program  # tools/program_text.py, beside this file

UNSUPPORTED_EXIT = 77


class Unsupported(Exception):
    pass


# ------------------------------------------------------------ the interpreter

def interpret(torch, checkpoint, program, args, held):
    """Runs `program` (a Body) on `args`; checkpoint regions' inputs go to `held`."""
    import torch.nn.functional as F

    def run(body, values):
        env = {pid: v for (pid, _, _), v in zip(body.params, values)}
        for op in body.ops:
            x = [env[v] for v in op.inputs]
            k = op.kind
            if k == "matmul":
                y = torch.matmul(x[0], x[1])
            elif k == "relu":
                y = torch.relu(x[0])
            elif k == "sin":
                y = torch.sin(x[0])
            elif k == "cos":
                y = torch.cos(x[0])
            elif k == "square":
                y = x[0] * x[0]
            elif k == "add":
                y = x[0] + x[1]
            elif k == "mul":
                y = x[0] * x[1]
            elif k == "sum":
                y = x[0].sum()
            elif k == "name":
                y = x[0]
            elif k == "softmax":
                y = torch.softmax(x[0], dim=-1)
            elif k == "layer_norm":
                y = F.layer_norm(x[0], (x[0].shape[-1],), x[1], x[2], eps=1e-5)
            elif k == "gelu":
                y = F.gelu(x[0], approximate="tanh")
            elif k == "scale":
                y = x[0] * float(op.attrs["scalar"])
            elif k == "transpose":
                y = x[0].transpose(-1, -2)
            elif k == "bias_add":
                y = x[0] + x[1]
            elif k == "split_heads":
                b, h = op.attrs["ints"]
                bs, d = x[0].shape
                y = x[0].reshape(b, bs // b, h, d // h).permute(0, 2, 1, 3).reshape(b * h, bs // b, d // h)
            elif k == "merge_heads":
                (b,) = op.attrs["ints"]
                bh, s, dh = x[0].shape
                h = bh // b
                y = x[0].reshape(b, h, s, dh).permute(0, 2, 1, 3).reshape(b * s, h * dh)
            elif k == "checkpoint":
                policy = op.attrs.get("policy", "nothing_saveable")
                fn = (lambda b: (lambda *a: run(b, a)))(op.body)
                if policy == "everything_saveable":
                    y = fn(*x)
                elif policy == "nothing_saveable":
                    held.extend(x)
                    y = checkpoint(fn, *x, use_reentrant=False)
                else:
                    raise Unsupported("checkpoint policy %r (torch 1.13 has no selective checkpointing)" % policy)
            elif k == "scan":
                if op.attrs.get("schedule"):
                    raise Unsupported("scan schedule %r" % op.attrs["schedule"])
                carry, xs = x[0], x[1:]
                for step in range(xs[0].shape[0] if xs else 0):
                    carry = run(op.body, [carry] + [t[step] for t in xs])
                y = carry
            elif k == "chain":
                if op.attrs.get("schedule"):
                    raise Unsupported("chain schedule %r" % op.attrs["schedule"])
                y = run(op.body, x)
            else:
                raise Unsupported("op %r" % k)
            env[op.out] = y
        return env[body.result]

    return run(program, args)


def main(argv):
    if len(argv) != 2:
        print("usage: torch_engine.py DIR", file=sys.stderr)
        return 2
    d = argv[1]
    try:
        import numpy as np
        import torch
        from torch.utils.checkpoint import checkpoint
    except ImportError as e:
        print("unsupported: PyTorch is not installed (%s)" % e)
        return UNSUPPORTED_EXIT
    with open(os.path.join(d, "program.txt")) as f:
        program = parse_program(f.read())
    if program.int_params:  # ids, targets, seeds: the ops that read them are not mapped yet
        print("unsupported: program %s: integer (i32) input(s) %s: embedding, dropout, masked_fill "
              "and cross_entropy are not mapped in this engine yet" % (program.name, ", ".join(sorted(program.int_params))))
        return UNSUPPORTED_EXIT
    wrt = [name for _, name, _ in program.params]
    if os.path.exists(os.path.join(d, "case.json")):
        with open(os.path.join(d, "case.json")) as f:
            wrt = json.load(f).get("wrt", wrt)
    args = []
    for _, name, shape in program.params:
        t = torch.from_numpy(np.load(os.path.join(d, name + ".npy")).astype(np.float32))
        if tuple(t.shape) != shape:
            raise ParseError("%s.npy is %s, the program says %s" % (name, tuple(t.shape), shape))
        args.append(t.requires_grad_(name in wrt))
    torch.manual_seed(0)

    saved, held = [], []

    def pack(t):
        saved.append(t)
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = interpret(torch, checkpoint, program, args, held)
    except Unsupported as e:
        print("unsupported: %s" % e)
        return UNSUPPORTED_EXIT
    arg_ptrs = {a.storage().data_ptr() for a in args}
    seen, residual = set(), 0
    for t in saved + held:
        s = t.storage()
        if s.data_ptr() in arg_ptrs or s.data_ptr() in seen:
            continue
        seen.add(s.data_ptr())
        residual += s.nbytes()
    del saved, held
    by_name = {name: a for (_, name, _), a in zip(program.params, args)}
    grads = torch.autograd.grad(loss, [by_name[n] for n in wrt], allow_unused=True)
    np.save(os.path.join(d, "loss.npy"), loss.detach().numpy().astype(np.float32))
    for n, g in zip(wrt, grads):
        g = torch.zeros_like(by_name[n]) if g is None else g
        np.save(os.path.join(d, "grad_%s.npy" % n), g.detach().numpy().astype(np.float32))
    with open(os.path.join(d, "stats.json"), "w") as f:
        json.dump({"engine": "torch %s" % torch.__version__, "residual_bytes": residual}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
