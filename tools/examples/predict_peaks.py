"""Predicts the peak memory of a model's training step under each engine
and policy at sizes that need not fit this machine: the model is built on
PyTorch's meta device (no weights allocated), exported shapes only
(torch_export's shapes-only mode; token ids real), and each row is planned
by `remat plan` (a dry run: no kernel runs, nothing of the model's size is
allocated). --confirm exports the same model with real weights at the
same size and runs every row, each measured peak set beside the shapes-only
prediction; any difference is an error (exit 1).

    .venv/bin/python tools/examples/predict_peaks.py gpt2 --batch 8 --tokens 1024
    .venv/bin/python tools/examples/predict_peaks.py llama-1b --batch 1 --tokens 2048
    .venv/bin/python tools/examples/predict_peaks.py gpt2 --batch 1 --tokens 512 --confirm

Models: tools/real_models.py's (gpt2: GPT-2 small, 124 M parameters;
llama-1b: Llama 3.2 1B's shape, 1.24 B; llama-100m; nanogpt: the
Shakespeare GPT; resnet50), with their own checkpointing on, in training
mode. One Markdown row per engine and policy: the
predicted peak, the seconds `remat plan` took, and with --confirm the
measured peak.
"""

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(TOOLS, "testdata"))
import real_models  # noqa: E402
from torch_export import export  # noqa: E402

# (row, remat's options): eager stores everything; the others honour the
# model's checkpoint regions under a policy (as written: each region saves
# nothing, as torch.utils.checkpoint).
ROWS = [
    ("eager", ["--engine", "eager"]),
    ("recompute, as written", ["--engine", "recompute"]),
    ("recompute, dots_saveable", ["--engine", "recompute", "--policy", "dots_saveable"]),
    ("recompute, memory_budget:peak:min", ["--engine", "recompute", "--policy", "memory_budget:peak:min"]),
]


def export_at(name, batch, tokens, out, meta):
    """Exports the model at (batch, tokens) into out, in a process of its
    own (the trace holds every tensor the forward made until it ends, and
    the memory would stay with this process, under the runs); returns
    (seconds, parameters)."""
    ctx = multiprocessing.get_context("spawn")  # a fork of a process that ran OpenMP threads can hang
    queue = ctx.Queue()
    child = ctx.Process(target=_export_child, args=(name, batch, tokens, out, meta, queue))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit("predict_peaks: exporting %s (%s) failed, exit code %s"
                         % (name, "shapes only" if meta else "real weights", child.exitcode))
    return queue.get()


def _export_child(name, batch, tokens, out, meta, queue):
    if meta:
        with torch.device("meta"):
            model = real_models.build(name, batch, tokens)
    else:
        model = real_models.build(name, batch, tokens)
    start = time.time()
    export(model.module, model.inputs, out, loss=model.loss, loss_inputs=model.loss_inputs)
    queue.put((time.time() - start, model.parameters()))


def remat(remat_bin, command, program, options, inputs=None):
    """remat `command` on the program; its output, or SystemExit naming the
    command and what it said."""
    cmd = [remat_bin, command, "--program", program, "--max-memory", "0"] + options
    if inputs:
        cmd += ["--inputs", inputs, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("predict_peaks: %s failed:\n%s" % (" ".join(cmd), done.stderr.strip()))
    return done.stdout


def predicted(plan_output):
    """The bytes of the plan's last line, `predicted peak N bytes at ...`."""
    last = plan_output.strip().splitlines()[-1].split()
    if last[:2] != ["predicted", "peak"]:
        raise SystemExit("predict_peaks: remat plan ended with %r, not its predicted peak" % " ".join(last))
    return int(last[2])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model of tools/real_models.py: " + ", ".join(real_models.names()))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--confirm", action="store_true",
                        help="also export with real weights and run every row: measured peak = predicted")
    parser.add_argument("--remat", default=os.path.join(os.path.dirname(TOOLS), "bazel-bin", "tools", "remat"),
                        help="the remat binary")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.tokens < 1:
        raise SystemExit("predict_peaks: --batch and --tokens must be positive")
    if args.model not in real_models.SIZES:
        raise SystemExit("predict_peaks: no model %r; models: %s" % (args.model, ", ".join(real_models.names())))
    with tempfile.TemporaryDirectory(prefix="predict_peaks_") as work:  # a real export is the model's size
        _rows(args, work)


def _rows(args, work):
    """main's work, its exports under `work`."""
    seconds, params = export_at(args.model, args.batch, args.tokens, os.path.join(work, "shapes"), meta=True)
    print("%s, %.1f M parameters, batch %d of %d tokens: exported shapes only in %.1f s"
          % (args.model, params / 1e6, args.batch, args.tokens, seconds))
    real = None
    if args.confirm:
        real = os.path.join(work, "real")
        seconds, _ = export_at(args.model, args.batch, args.tokens, real, meta=False)
        print("exported with real weights in %.1f s" % seconds)
    print()
    print("| engine, policy | predicted peak GiB | plan s |%s" % (" measured peak GiB |" if real else ""))
    print("| --- | ---: | ---: |%s" % (" ---: |" if real else ""))
    wrong = []
    for row, options in ROWS:
        start = time.time()
        peak = predicted(remat(args.remat, "plan", os.path.join(work, "shapes", "program.txt"), options))
        cells = "| %s | %.3f | %.1f |" % (row, peak / 2 ** 30, time.time() - start)
        if real:
            stats = json.loads(remat(args.remat, "run", os.path.join(real, "program.txt"), options, real))["stats"]
            cells += " %.3f |" % (stats["peak_bytes"] / 2 ** 30)
            if stats["peak_bytes"] != peak:
                wrong.append("%s: predicted %d bytes shapes only, measured %d" % (row, peak, stats["peak_bytes"]))
        print(cells, flush=True)
    if wrong:
        raise SystemExit("predict_peaks: the shapes-only prediction is not the measurement:\n  " + "\n  ".join(wrong))
    if real:
        print("\nevery measured peak equals its shapes-only prediction, to the byte")


if __name__ == "__main__":
    main()
