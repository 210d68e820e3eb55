"""remat conform over every problem with tools/jax_engine.py as the engine.

Needs the virtual environment that tools/python_env.sh makes (.venv/ in the
workspace, with JAX): $REMAT_VENV when set, otherwise the workspace's .venv,
the workspace found from this file's real path (Bazel's runfiles are
symlinks to the sources). Without it the test prints SKIPPED and passes:
JAX is optional, and Bazel's test installs nothing (.ci/run runs
tools/python_env.sh first).

Every problem runs as written and under the policies JAX and remat share
(by default the largest problems, LARGE, as written only; under them too with
REMAT_FULL=1, tools/ci_full.sh); the problems with checkpoint_name labels run
under the names-policies too,
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

import scheduled_case  # tools/scheduled_case.py, beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
REMAT = os.path.join(HERE, "remat")
ENGINE = os.path.join(HERE, "jax_engine.py")

# Every problem under each of these (as_written: the problem as it is).
POLICIES = ["as_written", "nothing_saveable", "everything_saveable", "dots_saveable",
            "dots_with_no_batch_dims_saveable"]
# The largest problems at their test sizes: JAX compiles every case (gpt
# 14 s, gpt_scan 12 s, resnet 8 s, moe 5 s a case on 2 cores; the others
# about 1 s). By default they run as written only, under POLICIES with
# REMAT_FULL=1 (tools/ci_full.sh).
LARGE = ["gpt", "gpt_scan", "resnet", "moe"]
FULL = os.environ.get("REMAT_FULL") == "1"
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
        if line.startswith("      "):
            continue  # under a case: its rerun line, or where its residuals differ (checked by the caller)
        m = CASE_LINE.match(line)
        if not m:
            raise AssertionError("remat conform printed %r, not a case line" % line)
        cases.append((m.group(1).strip(), m.group(2), m.group(3) or "as_written", m.group(4)))
    return r, cases


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
        # Where JAX's residuals differ from remat's, both listings are shown
        # site by site, JAX's named by the program's sites (jax_engine.py's
        # frames excluded), not by the interpreter's lines.
        differ = [d for o, _, _, d in cases if o == "PASS" and not d.endswith("B)")]
        if differ:
            self.assertIn("      where the residuals differ from remat's, by site:\n", r.stdout)
            engine_lines = [l for l in r.stdout.splitlines() if l.startswith("        engine: ")]
            self.assertTrue(engine_lines, "no engine line under a differing case:\n" + r.stdout)
            self.assertEqual([l for l in engine_lines if "jax_engine.py" in l], [],
                             "JAX's residuals named by the interpreter's lines, not the program's sites")
            self.assertTrue(any(re.search(r" from problems/\w+\.cc:\d+ \(%\d+ \w+\)$", l) for l in engine_lines),
                            "no JAX residual named by its op's site:\n" + "\n".join(engine_lines))
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
        for p in list(MORE_POLICIES) + LARGE:
            self.assertIn(p, names, "MORE_POLICIES or LARGE names %s, which remat list does not" % p)
        if FULL:
            self.check(names, POLICIES)
            return
        self.check([p for p in names if p not in LARGE], POLICIES)
        self.check(LARGE, ["as_written"])

    def run_scheduled(self, problem, params, schedule, strip_schedule=False):
        """Runs the engine on the scheduled program; returns (case, the run)."""
        d = tempfile.mkdtemp(prefix="jax_engine_test.")
        self.addCleanup(shutil.rmtree, d)
        scheduled_case.write(d, REMAT, problem, params, schedule, strip_schedule)
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
                status, why = scheduled_case.compare(PY, d)
                self.assertEqual(status, 0, "%s: disagrees with remat's oracle:\n%s" % (case, why))
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
