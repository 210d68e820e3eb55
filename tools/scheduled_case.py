"""Scheduled programs as engine cases, for the tests of engines in another
process (tools/jax_engine_test.py, tools/torch_engine_test.py).

remat conform runs no schedules, so a test writes the case directory itself:

    write(d, remat, problem, params, schedule)   DIR/program.txt (`remat program
                                                 --schedule`), the inputs,
                                                 case.json, and DIR/ref/ with
                                                 the float64 oracle's loss and
                                                 gradients
    compare(python, d)                           (exit status, message): the
                                                 engine's loss.npy and grad_*.npy
                                                 against DIR/ref/'s

compare runs in `python` (an interpreter with numpy: the engine's), since
the test's own may have none.
"""

import json
import os
import shutil
import subprocess

# Compares DIR/loss.npy and DIR/grad_*.npy with DIR/ref/'s: prints one line
# per disagreeing tensor and exits 1 if there is one, 2 if a file is missing.
_COMPARE = r"""
import glob, os, sys
import numpy as np
d = sys.argv[1]
bad = []
refs = sorted(glob.glob(os.path.join(d, "ref", "*.npy")))
if not refs:
    print("no reference files in %s/ref" % d)
    sys.exit(2)
for ref_path in refs:
    name = os.path.basename(ref_path)
    got_path = os.path.join(d, name)
    if not os.path.exists(got_path):
        print("%s: the engine wrote no %s" % (d, name))
        sys.exit(2)
    ref = np.load(ref_path).astype(np.float64)
    got = np.load(got_path).astype(np.float64)
    if got.shape != ref.shape:
        bad.append("%s: shape %s, the oracle's %s" % (name, got.shape, ref.shape))
        continue
    err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    limit = 1e-4 * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    if not err <= limit:
        bad.append("%s: max |engine - oracle| %.3g > %.3g" % (name, err, limit))
print("\n".join(bad))
sys.exit(1 if bad else 0)
"""


def write(d, remat, problem, params, schedule, strip_schedule=False):
    """Writes the case of `problem` (params: ["L=4", ...]) under `schedule`
    into the existing directory d; with strip_schedule, the program without
    its schedule attribute (a chain or scan run as written)."""
    sizes = [a for kv in params for a in ("--param", kv)]
    subprocess.run([remat, "run", "--problem", problem, "--engine", "oracle", "--schedule", schedule,
                    "--dump", d] + sizes, capture_output=True, text=True, check=True)
    os.makedirs(os.path.join(d, "ref"))
    wrt = []
    for name in sorted(os.listdir(d)):
        if name == "loss.npy" or name.startswith("grad_"):
            shutil.move(os.path.join(d, name), os.path.join(d, "ref", name))
            if name.startswith("grad_"):
                wrt.append(name[len("grad_"):-len(".npy")])
    text = subprocess.run([remat, "program", "--problem", problem, "--schedule", schedule] + sizes,
                          capture_output=True, text=True, check=True).stdout
    attr = ' schedule="%s"' % schedule
    if attr not in text:
        raise AssertionError("remat program --schedule %s printed no %s:\n%s" % (schedule, attr, text))
    if strip_schedule:
        text = text.replace(attr, "")
    with open(os.path.join(d, "program.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"problem": problem, "wrt": wrt}, f)


def compare(python, d):
    """(0, "") when the engine's files in d agree with d/ref/'s within
    1e-4 of the largest reference element; else (1 or 2, what disagrees)."""
    c = subprocess.run([python, "-c", _COMPARE, d], capture_output=True, text=True)
    return c.returncode, c.stdout + c.stderr
