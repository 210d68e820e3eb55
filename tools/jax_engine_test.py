"""remat conform over every problem with tools/jax_engine.py as the engine.

Needs the virtual environment that tools/python_env.sh makes (.venv/ in the
workspace, with JAX): $REMAT_VENV when set, otherwise the workspace's .venv,
the workspace found from this file's real path (Bazel's runfiles are
symlinks to the sources). Without it the test prints SKIPPED and passes:
JAX is optional, and Bazel's test installs nothing (.ci/run runs
tools/python_env.sh first).

Every problem runs as written and under the policies JAX and remat share;
the problems with checkpoint_name labels run under the names-policies too,
and transformer_stack under the offload policies and policies JAX has no
namesake for. No case may fail; the unsupported ones must be exactly
EXPECTED_UNSUPPORTED, each with its reason.

remat conform runs no schedules: scheduled programs (`remat program
--schedule`) run here directly, against `remat run --engine oracle --dump`'s
value and gradients: a checkpoint_every:K scan (which the engine maps to
lax.scan) and a chain without a schedule must agree; a chain or a scan with
one of remat's reversal schedules must be unsupported, with the reason.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REMAT = os.path.join(HERE, "remat")
ENGINE = os.path.join(HERE, "jax_engine.py")

# Every problem under each of these (as_written: the problem as it is).
POLICIES = ["as_written", "nothing_saveable", "everything_saveable", "dots_saveable",
            "dots_with_no_batch_dims_saveable"]
# Per problem, more policies: the names-policies over its checkpoint_name
# labels (one name each: remat's --policies splits at commas), the offload
# policies, and what JAX has no namesake for.
MORE_POLICIES = {
    # The labels a, b, c are outside the checkpoint regions: the policies
    # change nothing there, as in JAX.
    "sin_chain": ["save_only_these_names:a", "save_any_names_but_these:b",
                  "save_anything_except_these_names:c"],
    "transformer_stack": [
        "save_only_these_names:attn_probs",
        "save_only_these_names:ffn_hidden",
        "save_any_names_but_these:attn_out",
        "save_anything_except_these_names:attn_probs",
        "save_from_both_policies:dots_with_no_batch_dims_saveable+save_only_these_names:attn_probs",
        "save_and_offload_only_these_names:attn_probs/ffn_hidden",
        "offload_dot_with_no_batch_dims",
        "memory_budget:0.5",
    ],
}
# (problem, policy) -> what the engine's "unsupported:" reason must say.
EXPECTED_UNSUPPORTED = {
    ("transformer_stack", "memory_budget:0.5"):
        "program transformer_stack: %12 = scan: %11 = checkpoint: checkpoint policy 'memory_budget:0.5' "
        "(remat's own planner; JAX has no memory_budget policy)",
}

# "PASS  layer_loss N=8 d=16 policy=dots_saveable: worst ..." (conform.cc).
CASE_LINE = re.compile(r"^(PASS |FAIL |UNSUP) ([^\s:]+)(?: (?!policy=)[^\s:]+)*(?: policy=(\S+))?: (.*)$")


def venv_python():
    """The venv's python, or (None, why not)."""
    venv = os.environ.get("REMAT_VENV")
    if not venv:
        workspace = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        venv = os.path.join(workspace, ".venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        return None, "no %s (tools/python_env.sh makes it)" % py
    r = subprocess.run([py, "-c", "import jax, numpy"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, "%s cannot import jax: %s" % (py, (r.stderr.strip().splitlines() or ["?"])[-1])
    return py, ""


PY, WHY_NOT = venv_python()


def problems():
    """The problem names `remat list` prints."""
    r = subprocess.run([REMAT, "list"], capture_output=True, text=True, check=True)
    names, section = [], None
    for line in r.stdout.splitlines():
        if line and not line.startswith(" "):
            section = line.rstrip(":")
        elif section == "problems" and re.match(r"^  \S", line):
            names.append(line.split()[0])
    return names


def conform(problem_names, policies):
    """Runs remat conform; returns (its output, [(outcome, problem, policy, detail)])."""
    cmd = [REMAT, "conform", "--engine-cmd", "%s %s" % (PY, ENGINE), "--timeout", "120",
           "--problems", ",".join(problem_names), "--policies", ",".join(policies)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    print("$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    cases = []
    lines = r.stdout.splitlines()
    for line in lines[:-1]:
        if line.startswith("residuals follow the policy"):
            continue  # the run's memory judgement (checked by the caller)
        m = CASE_LINE.match(line)
        if not m:
            raise AssertionError("remat conform printed %r, not a case line" % line)
        cases.append((m.group(1).strip(), m.group(2), m.group(3) or "as_written", m.group(4)))
    return r, cases


# Compares DIR/loss.npy and DIR/grad_*.npy with DIR/ref/'s: prints one line
# per disagreeing tensor and exits 1 if there is one, 2 if a file is missing.
COMPARE = r"""
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


def scheduled_case(d, problem, params, schedule, strip_schedule=False):
    """Writes DIR/program.txt (`remat program` under `schedule`; with
    strip_schedule, the schedule attribute removed), the inputs, case.json,
    and DIR/ref/ with the oracle's loss and gradients."""
    sizes = [a for kv in params for a in ("--param", kv)]
    subprocess.run([REMAT, "run", "--problem", problem, "--engine", "oracle", "--schedule", schedule,
                    "--dump", d] + sizes, capture_output=True, text=True, check=True)
    os.makedirs(os.path.join(d, "ref"))
    wrt = []
    for name in sorted(os.listdir(d)):
        if name == "loss.npy" or name.startswith("grad_"):
            shutil.move(os.path.join(d, name), os.path.join(d, "ref", name))
            if name.startswith("grad_"):
                wrt.append(name[len("grad_"):-len(".npy")])
    text = subprocess.run([REMAT, "program", "--problem", problem, "--schedule", schedule] + sizes,
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


@unittest.skipIf(PY is None, "JAX is not installed: %s: skipped" % WHY_NOT)
class JaxEngineConformTest(unittest.TestCase):

    def check(self, problem_names, policies):
        r, cases = conform(problem_names, policies)
        out = r.stdout + r.stderr
        want = {(p, q) for p in problem_names for q in policies}
        got = {(p, q) for _, p, q, _ in cases}
        self.assertEqual(got, want, "remat conform ran other cases than asked:\n" + out)
        failed = ["%s %s: %s" % (p, q, d) for o, p, q, d in cases if o == "FAIL"]
        self.assertEqual(failed, [], "cases failed:\n" + "\n".join(failed))
        self.assertEqual(r.returncode, 0, "remat conform exited %d with no FAIL line:\n%s" % (r.returncode, out))
        for o, p, q, d in cases:
            expected = EXPECTED_UNSUPPORTED.get((p, q))
            if o == "UNSUP":
                self.assertIsNotNone(expected, "%s %s: unsupported, expected to pass: %s" % (p, q, d))
                self.assertIn("unsupported: " + expected, d, "%s %s: the reason" % (p, q))
            else:
                self.assertIsNone(expected, "%s %s: passed, expected unsupported (%s)" % (p, q, expected))
                # The engine measured its bytes, and remat conform checked them.
                self.assertRegex(d, r"; residuals \d+ B \(remat recompute: \d+ B(, [+-]([\d.]+|inf)%)?\)$", "%s %s" % (p, q))
        # JAX's residuals follow the policy on every problem where remat's do.
        if "nothing_saveable" in policies and "everything_saveable" in policies:
            self.assertRegex(r.stdout, r"residuals follow the policy \(.*\) on (\d+) of \1 problems\n",
                             "remat conform's memory judgement")
        summary = r.stdout.splitlines()[-1]
        n_unsup = sum(o == "UNSUP" for o, _, _, _ in cases)
        self.assertEqual(summary, "%d passed, 0 failed, %d unsupported" % (len(cases) - n_unsup, n_unsup))
        return cases

    def test_every_problem_under_the_shared_policies(self):
        names = problems()
        self.assertGreaterEqual(len(names), 8, "remat list printed too few problems: %s" % names)
        for p in MORE_POLICIES:
            self.assertIn(p, names, "MORE_POLICIES names %s, which remat list does not" % p)
        self.check(names, POLICIES)

    def run_scheduled(self, problem, params, schedule, strip_schedule=False):
        """Runs the engine on the scheduled program; returns (case, the run)."""
        d = tempfile.mkdtemp(prefix="jax_engine_test.")
        self.addCleanup(shutil.rmtree, d)
        scheduled_case(d, problem, params, schedule, strip_schedule)
        r = subprocess.run([PY, ENGINE, d], capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        case = "%s %s schedule=%s%s" % (problem, " ".join(params), schedule,
                                        " (stripped: a chain without a schedule)" if strip_schedule else "")
        return d, case, r

    def test_scheduled_programs_that_map(self):
        for problem, params, schedule, strip in [
                ("scan_stack", ["L=5", "N=4", "d=8"], "checkpoint_every:2", False),
                ("scan_stack", ["L=4", "N=4", "d=8"], "checkpoint_every:1", False),
                ("transformer_stack", ["L=3", "D=8", "H=2", "F=16", "S=4", "B=2"], "checkpoint_every:2", False),
                ("mlp_chain", ["L=3", "N=4", "d=8"], "every:2", True)]:
            with self.subTest(problem=problem, schedule=schedule):
                d, case, r = self.run_scheduled(problem, params, schedule, strip)
                self.assertEqual(r.returncode, 0, "%s: the engine exited %d:\n%s%s"
                                 % (case, r.returncode, r.stdout, r.stderr))
                c = subprocess.run([PY, "-c", COMPARE, d], capture_output=True, text=True)
                self.assertEqual(c.returncode, 0, "%s: disagrees with remat's oracle:\n%s%s"
                                 % (case, c.stdout, c.stderr))
                with open(os.path.join(d, "stats.json")) as f:
                    stats = json.load(f)
                self.assertGreater(stats["residual_bytes"], 0, "%s: stats.json %s" % (case, stats))
                self.assertGreaterEqual(stats["peak_bytes"], stats["residual_bytes"], "%s: stats.json" % case)

    def test_reversal_schedules_are_unsupported(self):
        for problem, params, schedule in [("mlp_chain", ["L=3", "N=4", "d=8"], "every:2"),
                                          ("scan_stack", ["L=4", "N=4", "d=8"], "revolve:2")]:
            with self.subTest(problem=problem, schedule=schedule):
                d, case, r = self.run_scheduled(problem, params, schedule)
                self.assertEqual(r.returncode, 77, "%s: exit %d, expected 77 (unsupported):\n%s%s"
                                 % (case, r.returncode, r.stdout, r.stderr))
                kind = "chain" if problem == "mlp_chain" else "scan"
                self.assertIn("unsupported: program %s: %%" % problem, r.stdout, case)
                self.assertIn(": schedule '%s' (remat's own schedule of a %s's steps; JAX has none to map it to)"
                              % (schedule, kind), r.stdout, case)
                self.assertFalse(os.path.exists(os.path.join(d, "loss.npy")), "%s: wrote loss.npy" % case)

    def test_names_offload_and_unmapped_policies(self):
        for problem, policies in sorted(MORE_POLICIES.items()):
            with self.subTest(problem=problem):
                self.check([problem], policies)


if __name__ == "__main__":
    if PY is None:
        print("SKIPPED: JAX is not installed (%s); tools/jax_engine.py is not tested" % WHY_NOT)
    unittest.main()
