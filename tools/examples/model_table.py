"""The exporter's table of the model families the suite runs: for each of
tools/torch_export_models_test.py's families (the same builders, configs
and seed), the export time, the regions found against the checkpoint calls
made, remat's largest error against a float64 PyTorch run beside PyTorch's
own float32 error (loss, every gradient, every BatchNorm statistic; as
tools/model_judge.py judges them, each run against the float64 gradient
nearest it among those its ReLU-family kinks allow), the kink flips each
took, and the peaks of eager
(nothing recomputed), the model as written (recompute) and
memory_budget:peak:min, with the FLOPs each recomputes.

    .venv/bin/python tools/examples/model_table.py              # every family
    .venv/bin/python tools/examples/model_table.py gpt2 timm.vit
    .venv/bin/python tools/examples/model_table.py --timeout 900 torchvision.mobilenet_v2
    .venv/bin/python tools/examples/model_table.py --image-size 112 --batch 4 torchvision.resnet18
    .venv/bin/python tools/examples/model_table.py --more timm.nfnet_f0 bloom   # the models test's full set

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

import model_judge  # noqa: E402
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


def worst_error(ref, dumps):
    """(remat's, PyTorch float32's) largest error relative to float64, the
    largest ratio of remat's to PyTorch's on one tensor (PyTorch's at least
    model_judge.FLOOR), which the models test holds to model_judge.RATIO
    at most, and the flips each took at ReLU-family kinks."""
    rows, (mine, theirs, near) = models.judged(ref, dumps)
    remat = max(r[1] for r in rows)
    torch32 = max(r[2] for r in rows)
    ratio = max(r[1] / max(r[2], model_judge.FLOOR) for r in rows)
    return remat, torch32, ratio, mine, theirs, near


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
    parser.add_argument("--more", action="store_true",
                        help="the families of the models test's full set (REMAT_FULL=1) as well")
    args = parser.parse_args()
    TIMEOUT_S = args.timeout
    for flag, value in (("--image-size", args.image_size), ("--batch", args.batch)):
        if value is not None and value < 1:
            parser.error("%s must be at least 1, not %d" % (flag, value))
    models.CONVNET_SIZE.update(image=args.image_size, batch=args.batch)
    wanted = args.families
    families = models.FAMILIES + (models.MORE_FAMILIES if args.more else [])
    known = [family for family, _, _ in families]
    for family in wanted:
        if family not in known:
            parser.error("no family %r; the families are %s" % (family, ", ".join(known)))
    print("| family | export s | regions / calls | max error vs f64: remat (PyTorch f32) "
          "| worst ratio | kink flips: remat (PyTorch) / near | peak MiB: eager / as written / peak:min | recomputed MFLOP: as written / peak:min "
          "| peak:min s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for family, library, build in families:
        if wanted and family not in wanted:
            continue
        if models._library(library) is None:
            print("| %s | %s is not installed | | | | | | | |" % (family, library))
            continue
        model, inputs, loss, loss_inputs, calls, d, text, seconds = models.export_family(build, False)
        regions = text.count(" = checkpoint(")
        eager_peak, _, _ = run(d, "--engine", "eager")
        written_peak, written_flops, dumps = run(d, "--engine", "recompute")
        start = time.time()
        budget = run(d, "--engine", "recompute", "--policy", "memory_budget:peak:min")
        budget_s = time.time() - start
        min_peak, min_flops = budget[:2] if budget else (None, None)
        ref = model_judge.Reference(model, inputs, loss, loss_inputs)
        remat_err, torch_err, ratio, flips, torch_flips, near = worst_error(ref, dumps)
        print("| %s | %.1f | %d / %s | %.2g (%.2g) | %.2g | %d (%d) / %d | %s / %s / %s | %s / %s | %.0f |"
              % (family, seconds, regions, "?" if calls is None else calls, remat_err, torch_err, ratio, flips, torch_flips, near,
                 mib(eager_peak), mib(written_peak), mib(min_peak), mflop(written_flops), mflop(min_flops),
                 budget_s), flush=True)


if __name__ == "__main__":
    main()
