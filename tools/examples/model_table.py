"""The exporter's table of the model families the suite runs: for each of
tools/torch_export_models_test.py's families (the same builders, configs
and seed), the export time, the regions found against the checkpoint calls
made, remat's largest error against a float64 PyTorch run beside PyTorch's
own float32 error (loss, every gradient, every BatchNorm statistic; each
relative to that tensor's largest float64 element), and the peaks of eager
(nothing recomputed), the model as written (recompute) and
memory_budget:peak:min, with the FLOPs each recomputes.

    .venv/bin/python tools/examples/model_table.py              # every family
    .venv/bin/python tools/examples/model_table.py gpt2 timm.vit
    .venv/bin/python tools/examples/model_table.py --timeout 900 torchvision.mobilenet_v2
    .venv/bin/python tools/examples/model_table.py --image-size 112 --batch 4 torchvision.resnet18

A `remat run` past --timeout seconds (default 120) is shown as "over N s".

Needs tools/remat built (tools/bazel build //tools:remat); prints one
Markdown table.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
sys.path.insert(0, TOOLS)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import torch_export_models_test as models  # noqa: E402

REMAT = os.path.join(os.path.dirname(TOOLS), "bazel-bin", "tools", "remat")


TIMEOUT_S = 120  # --timeout


def run(d, *flags):
    """remat run's peak, recomputed FLOPs and dumped arrays for the case in
    `d`; None where it ran past TIMEOUT_S."""
    out = tempfile.mkdtemp()
    try:
        r = subprocess.run([REMAT, "run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--dump",
                            out] + list(flags), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        raise SystemExit("remat run %s on %s failed: %s" % (" ".join(flags), d, r.stderr.strip()))
    peak = int(re.search(r"^peak .*\((\d+) bytes\)", r.stdout, re.M).group(1))
    recomputed = int(re.search(r"^flops .*recomputed (\d+)", r.stdout, re.M).group(1))
    dumps = {f: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}
    return peak, recomputed, dumps


def worst_error(dumps, value64, grads64, state64, value32, grads32, state32):
    """(remat's, PyTorch float32's) largest error relative to float64, and
    the largest ratio of remat's to PyTorch's on one tensor (PyTorch's at
    least 64 * 2^-24), which the models test holds to 20 at most."""
    largest = max(np.max(np.abs(g)) for g in grads64.values())
    remat, torch32, ratio = 0.0, 0.0, 0.0
    pairs = [("loss", np.array(float(dumps["loss.npy"])), np.array(value32), np.array(value64), 1e-30)]
    for name, g in grads64.items():
        pairs.append((name, models.dumped(dumps, "grad", name), grads32[name], g, 1e-4 * largest))
    for name, s in state64.items():
        pairs.append((name, models.dumped(dumps, "state", name), state32[name], s, 1e-30))
    for _, got, ref32, ref64, floor in pairs:
        scale = max(np.max(np.abs(ref64)), floor)
        mine, theirs = np.max(np.abs(got - ref64)) / scale, np.max(np.abs(ref32 - ref64)) / scale
        remat, torch32 = max(remat, mine), max(torch32, theirs)
        ratio = max(ratio, mine / max(theirs, 64 * 2.0 ** -24))
    return remat, torch32, ratio


def mib(b):
    return "%.2f" % (b / 2.0 ** 20) if b is not None else "over %g s" % TIMEOUT_S


def mflop(f):
    return "%.1f" % (f / 1e6) if f is not None else "-"


def main():
    global TIMEOUT_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("families", nargs="*", help="families to run (default: every one)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per remat run")
    parser.add_argument("--image-size", type=int, help="the torchvision ResNets' and MobileNetV2's image side "
                        "(default 64; the ViTs' is in their configs)")
    parser.add_argument("--batch", type=int, help="those models' batch (default 2, ResNet-50 8)")
    args = parser.parse_args()
    TIMEOUT_S = args.timeout
    for flag, value in (("--image-size", args.image_size), ("--batch", args.batch)):
        if value is not None and value < 1:
            parser.error("%s must be at least 1, not %d" % (flag, value))
    models.CONVNET_SIZE.update(image=args.image_size, batch=args.batch)
    wanted = args.families
    known = [family for family, _, _ in models.FAMILIES]
    for family in wanted:
        if family not in known:
            parser.error("no family %r; the families are %s" % (family, ", ".join(known)))
    print("| family | export s | regions / calls | max error vs f64: remat (PyTorch f32) "
          "| worst ratio | peak MiB: eager / as written / peak:min | recomputed MFLOP: as written / peak:min "
          "| peak:min s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for family, library, build in models.FAMILIES:
        if wanted and family not in wanted:
            continue
        if models._library(library) is None:
            print("| %s | %s is not installed | | | | | | |" % (family, library))
            continue
        model, inputs, loss, loss_inputs, calls, d, text, seconds = models.export_family(build, False)
        regions = text.count(" = checkpoint(")
        eager_peak, _, _ = run(d, "--engine", "eager")
        written_peak, written_flops, dumps = run(d, "--engine", "recompute")
        start = time.time()
        budget = run(d, "--engine", "recompute", "--policy", "memory_budget:peak:min")
        budget_s = time.time() - start
        min_peak, min_flops = budget[:2] if budget else (None, None)
        value32, grads32, state32 = models._reference(model, inputs, loss, loss_inputs, torch.float32)
        value64, grads64, state64 = models._reference(model, inputs, loss, loss_inputs, torch.float64)
        remat_err, torch_err, ratio = worst_error(dumps, value64, grads64, state64, value32, grads32, state32)
        print("| %s | %.1f | %d / %d | %.2g (%.2g) | %.2g | %s / %s / %s | %s / %s | %.0f |"
              % (family, seconds, regions, calls, remat_err, torch_err, ratio, mib(eager_peak), mib(written_peak),
                 mib(min_peak), mflop(written_flops), mflop(min_flops), budget_s), flush=True)


if __name__ == "__main__":
    main()
