#!/usr/bin/env python3
"""The real-size models of tools/real_models.py, exported for remat and timed
in PyTorch as their users train them (the bench's --sweep=models runs both).

    .venv/bin/python tools/model_time.py export MODEL DIR [--batch B] [--tokens T] [--if-stale]
        [--meta | --shapes-only]
    .venv/bin/python tools/model_time.py time MODEL --engine ENGINE [--batch B] [--tokens T] [--repeats 5]
        [--max-seconds S]

export writes DIR/program.txt and its inputs (torch_export.export, real
weights) and DIR/model.json ({"model", "batch", "tokens", "parameters",
"export_seconds", "sources"}: sources, a digest of the files the export
depends on, tells whether DIR is stale). It prints one line. With
--if-stale it keeps an export whose model.json says the same model, sizes
and sources, and says so. With --meta the trace runs on the meta device
and the input files come from the CPU model's weights (torch_export's
weights=): the real trace keeps every tensor the forward makes (GPT-2
small at 1 x 1024 tokens: about 9 GB), --meta only the model. With
--shapes-only the trace runs on the meta device and no input file is
written: program.txt alone, for planning (`remat plan`, the bench's
search for the largest batch that fits), at the cost of neither.

time runs one training step (forward, the loss, backward: every parameter's
gradient; nothing else) of the model as ENGINE:
  torch             PyTorch eager, checkpointing off (it stores everything)
  torch-checkpoint  PyTorch eager with the model's own checkpointing
                    (torch.utils.checkpoint, non-reentrant; Hugging Face's
                    gradient_checkpointing_enable, nanoGPT's blocks,
                    apply_activation_checkpointing on ResNet-50's blocks)
  torch-compile     torch.compile of the model without checkpointing
                    (inductor, its default mode); compiling is not timed
on PyTorch's own kernels and threads. After two warm-up steps it times
--repeats steps (fewer once they took --max-seconds; one at least) and prints one JSON object: {"engine", "model", "version",
"threads", "min_ms", "median_ms", "times_ms", "compile_seconds", "loss",
"peak_rss_bytes"} (the last: the process's peak resident memory, which
includes the model and PyTorch itself). Exit 3 when PyTorch is missing, 2
for bad arguments (one line naming what was wrong).
"""

import argparse
import hashlib
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peer_time  # noqa: E402  (its timing loop: the peers of both kinds time alike)

ENGINES = ("torch", "torch-checkpoint", "torch-compile")
NOT_INSTALLED_EXIT = 3


def sources_digest():
    """A digest of the files an export depends on: the exporter's and the
    models' sources (a change to either makes an export stale)."""
    h = hashlib.sha256()
    names = sorted(n for n in os.listdir(HERE) if n.startswith("torch_export") and n.endswith(".py")
                   and not n.endswith("_test.py"))
    for n in names + ["real_models.py", os.path.join("testdata", "nanogpt.py")]:
        with open(os.path.join(HERE, n), "rb") as f:
            h.update(n.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def do_export(args, real_models):
    batch, tokens = real_models.size(args.model, args.batch, args.tokens)
    wanted = {"model": args.model, "batch": batch, "tokens": tokens, "sources": sources_digest(),
              "meta": bool(args.meta), "shapes_only": bool(args.shapes_only)}
    info_path = os.path.join(args.dir, "model.json")
    if args.if_stale and os.path.exists(info_path) and os.path.exists(os.path.join(args.dir, "program.txt")):
        try:
            with open(info_path) as f:
                old = json.load(f)
        except ValueError:
            old = {}
        if all(old.get(k) == v for k, v in wanted.items()):
            print("%s (batch %d x %d) in %s is up to date" % (args.model, batch, tokens, args.dir))
            return
    if os.path.isdir(args.dir):  # an older export's files go first (model.json first: a half-made
        # export must not pass for a whole one); nothing else there is touched
        for name in ["model.json"] + sorted(os.listdir(args.dir)):
            if (name in ("model.json", "program.txt") or name.endswith(".npy")) and \
                    os.path.exists(os.path.join(args.dir, name)):
                os.remove(os.path.join(args.dir, name))
    import torch
    from torch_export import _named_inputs, export
    if args.shapes_only:  # the meta device's model: its export is program.txt alone
        with torch.device("meta"):
            model = real_models.build(args.model, batch, tokens, checkpointed=True)
    else:
        model = real_models.build(args.model, batch, tokens, checkpointed=True)
    start = time.time()
    if args.meta:
        # The weights (by the names the export gives inputs: named_parameters'
        # paths, a checkpoint wrapper's prefix included) and the inputs by
        # forward's argument names, from the CPU model; the trace from its
        # twin on the meta device.
        weights = dict(model.module.named_parameters())
        weights.update(model.module.named_buffers())
        weights.update(_named_inputs(model.module, model.inputs)[2])
        with torch.device("meta"):
            twin = real_models.build(args.model, batch, tokens, checkpointed=True)
        export(twin.module, twin.inputs, args.dir, loss=twin.loss, loss_inputs=twin.loss_inputs, weights=weights)
    else:
        export(model.module, model.inputs, args.dir, loss=model.loss, loss_inputs=model.loss_inputs)
    seconds = time.time() - start
    info = dict(wanted, parameters=model.parameters(), export_seconds=round(seconds, 2))
    with open(os.path.join(args.dir, "model.json"), "w") as f:
        json.dump(info, f)
    print("exported %s (%.1f M parameters, batch %d x %d) to %s in %.1f s"
          % (args.model, info["parameters"] / 1e6, batch, tokens, args.dir, seconds))


def do_time(args, real_models):
    import torch
    model = real_models.build(args.model, args.batch, args.tokens, checkpointed=args.engine == "torch-checkpoint")
    params = [p for p in model.module.parameters() if p.requires_grad]
    if args.engine == "torch-compile":
        model.module = torch.compile(model.module)  # Model.step calls it

    def step():
        for p in params:
            p.grad = None
        loss = model.step()
        loss.backward()
        return float(loss)

    loss, compile_seconds, times = peer_time.timed(step, args.repeats, args.max_seconds)
    print(json.dumps({"engine": args.engine, "model": args.model, "version": "PyTorch " + torch.__version__,
                      "threads": torch.get_num_threads(), "min_ms": min(times),
                      "median_ms": statistics.median(times), "times_ms": times,
                      "compile_seconds": compile_seconds, "loss": loss,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("export", "time"):
        p = sub.add_parser(name)
        p.add_argument("model")
        if name == "export":
            p.add_argument("dir")
            p.add_argument("--if-stale", action="store_true", help="keep an up-to-date export")
            kind = p.add_mutually_exclusive_group()
            kind.add_argument("--meta", action="store_true",
                              help="trace the model on the meta device, the input files from the CPU "
                                   "model's weights (torch_export's weights=): the export holds the "
                                   "weights, not every tensor of the forward")
            kind.add_argument("--shapes-only", action="store_true",
                              help="trace the model on the meta device and write program.txt alone "
                                   "(no input file): for planning")
        else:
            p.add_argument("--engine", required=True, choices=ENGINES)
            p.add_argument("--repeats", type=int, default=5)
            p.add_argument("--max-seconds", type=float,
                           help="stop timing once the timed steps took this long (at least one step)")
        p.add_argument("--batch", type=int)
        p.add_argument("--tokens", type=int, help="tokens (or the image side of resnet50)")
    args = parser.parse_args(argv)
    try:
        import real_models
    except ImportError as e:
        print("model_time: PyTorch is not installed (%s): tools/python_env.sh installs it" % e)
        return NOT_INSTALLED_EXIT
    if args.model not in real_models.SIZES:
        parser.error("no model %r; models: %s" % (args.model, ", ".join(real_models.names())))
    for flag in ("batch", "tokens"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error("--%s=%d: must be positive" % (flag, getattr(args, flag)))
    if getattr(args, "repeats", 1) < 1:
        parser.error("--repeats=%d: must be positive" % args.repeats)
    if getattr(args, "max_seconds", None) is not None and not args.max_seconds > 0:
        parser.error("--max-seconds=%g: must be positive" % args.max_seconds)
    if args.command == "export":
        do_export(args, real_models)
    else:
        do_time(args, real_models)
    return 0


if __name__ == "__main__":
    sys.exit(main())
