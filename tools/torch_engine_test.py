"""remat conform over every problem with tools/torch_engine.py as the engine.

Needs PyTorch 2: it runs the engine on the first interpreter that imports
torch 2 or later: the workspace's .venv (tools/python_env.sh: PyTorch 2.9.1;
$REMAT_VENV names another), this one, then Debian's /usr/bin/python3. With
none (no .venv, or only Debian's PyTorch 1.13, whose checkpoint_sequential
has no use_reentrant and which has no selective activation checkpointing),
it says SKIPPED with the reason. Every problem runs as written and under the
policies below (by default the selective and offloading ones on SELECTIVE_ON
only; on every problem with REMAT_FULL=1, tools/ci_full.sh); every case
passes but the offloading ones (unsupported, with the reason).

remat conform runs no schedules: scheduled programs (tools/scheduled_case.py)
run directly against the oracle's value and gradients: segments:K, as
checkpoint_sequential, must agree, with the residuals its segments keep;
remat's other schedules must be unsupported, with the reason.
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

# A case is a process that imports torch (about 2 s): 12 problems under 6
# policies (the selective kinds: dots, dots without batch dimensions as
# dot_policy is written, names; everything_saveable beside nothing_saveable
# for remat conform's memory judgement) keep the test within its timeout.
POLICIES = ["as_written", "nothing_saveable", "everything_saveable", "dots_saveable", "save_only_these_names",
            "offload_dot_with_no_batch_dims"]
SELECTIVE = ["dots_saveable", "save_only_these_names"]
# By default the policies past the first three (which remat conform's memory
# judgement needs on every problem) run on these problems only: the one
# written with a dots policy, the transformer block (dots with and without
# batch axes, names) and the one with checkpoint_name labels. 48 cases, not
# 78: 118 s, not 209, on 2 cores (`tools/bazel test --nocache_test_results //...`).
SELECTIVE_ON = ["dot_policy", "transformer_stack", "sin_chain"]
FULL = os.environ.get("REMAT_FULL") == "1"


def torch_python():
    """The first interpreter with PyTorch 2 and numpy, or (None, why not)."""
    venv = os.environ.get("REMAT_VENV") or os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                                                        ".venv")
    seen = []
    for py in (os.path.join(venv, "bin", "python"), sys.executable, "/usr/bin/python3"):
        if not py or not os.path.exists(py):
            continue
        r = subprocess.run([py, "-c", "import torch, numpy; print(torch.__version__)"], capture_output=True, text=True)
        if r.returncode != 0:
            seen.append("%s: no torch" % py)
        elif int(r.stdout.strip().split(".")[0]) < 2:
            seen.append("%s: PyTorch %s, not 2" % (py, r.stdout.strip()))
        else:
            return py, ""
    return None, "; ".join(seen) or "no python found"


PY, WHY_NOT = torch_python()


@unittest.skipIf(PY is None, "PyTorch 2 is not installed (tools/python_env.sh makes .venv with it): %s: skipped"
                 % WHY_NOT)
class TorchEngineConformTest(unittest.TestCase):

    def run_scheduled(self, problem, params, schedule):
        """The engine on `problem` under `schedule`: (its case directory, the run)."""
        d = tempfile.mkdtemp(prefix="torch_engine_test.")
        self.addCleanup(shutil.rmtree, d)
        scheduled_case.write(d, os.path.join(HERE, "remat"), problem, params, schedule)
        r = subprocess.run([PY, os.path.join(HERE, "torch_engine.py"), d], capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        return d, r

    def test_segments_schedule_runs_as_checkpoint_sequential(self):
        # remat conform runs no schedules: the scheduled programs run here,
        # against the oracle's value and gradients. segments:K is
        # checkpoint_sequential's; the other schedules have no PyTorch
        # equivalent and are refused with the reason.
        residuals = {}
        for problem, params, schedule in [("mlp_chain", ["L=4", "N=8", "d=16"], "segments:2"),
                                          ("mlp_chain", ["L=4", "N=8", "d=16"], "segments:4"),
                                          ("scan_stack", ["L=5", "N=4", "d=8"], "segments:2"),
                                          ("scan_stack", ["L=5", "N=4", "d=8"], "segments:9")]:
            with self.subTest(problem=problem, schedule=schedule):
                d, r = self.run_scheduled(problem, params, schedule)
                self.assertEqual(r.returncode, 0, "%s %s: exit %d:\n%s%s" % (problem, schedule, r.returncode,
                                                                             r.stdout, r.stderr))
                status, why = scheduled_case.compare(PY, d)
                self.assertEqual(status, 0, "%s %s disagrees with remat's oracle:\n%s" % (problem, schedule, why))
                with open(os.path.join(d, "stats.json")) as f:
                    residuals[(problem, schedule)] = json.load(f)["residual_bytes"]
        # scan_stack L=5, steps of f32[4,8] (128 B): with 2 segments
        # (2 steps, then 3 run plainly) PyTorch keeps the carries 2..5; with
        # one segment per step, the inputs of the 4 checkpointed ones (the
        # first is the argument x) and the last step's: carries 1..5.
        self.assertEqual(residuals[("scan_stack", "segments:2")], 4 * 128)
        self.assertEqual(residuals[("scan_stack", "segments:9")], 5 * 128)
        for problem, params, schedule in [("mlp_chain", ["L=3", "N=4", "d=8"], "revolve:2"),
                                          ("scan_stack", ["L=4", "N=4", "d=8"], "every:2")]:
            with self.subTest(problem=problem, schedule=schedule):
                d, r = self.run_scheduled(problem, params, schedule)
                self.assertEqual(r.returncode, 77, "%s %s: exit %d, expected 77:\n%s%s"
                                 % (problem, schedule, r.returncode, r.stdout, r.stderr))
                self.assertIn("schedule '%s' (PyTorch's checkpoint_sequential is remat's segments:K; "
                              "no PyTorch equivalent of the others)" % schedule, r.stdout)
                self.assertFalse(os.path.exists(os.path.join(d, "loss.npy")))

    def conform(self, policies, problems=None):
        """remat conform with the engine: (its lines, the case lines); every case passed or unsupported."""
        remat = os.path.join(HERE, "remat")
        env = dict(os.environ, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="passive")
        cmd = [remat, "conform", "--engine-cmd", "%s %s" % (PY, os.path.join(HERE, "torch_engine.py")),
               "--policies", ",".join(policies), "--timeout", "120"]
        if problems:
            cmd += ["--problems", ",".join(problems)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        print("$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[-1], r"^\d+ passed, 0 failed, \d+ unsupported$")
        cases = [l for l in lines[:-1] if l.split()[:1] in (["PASS"], ["UNSUP"])]
        judgements = [l for l in lines if l.startswith("residuals follow the policy")]
        self.assertEqual(len(cases), len(lines) - 1 - len(judgements), r.stdout)
        return lines, cases

    def test_every_supported_case_passes(self):
        version = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                 text=True).stdout.strip()
        print("PyTorch %s (%s)" % (version, PY))
        if FULL:
            lines, cases = self.conform(POLICIES)
        else:
            lines, cases = self.conform(POLICIES[:3])
            _, more = self.conform(POLICIES[3:], SELECTIVE_ON)
            cases += more
        # PyTorch's relu saves its output, the next layer's input: a chain of
        # them saves as much stored as checkpointed (scan_stack, mlp_chain),
        # so its residuals follow the policy on most problems, not all.
        follow = [l for l in lines if l.startswith("residuals follow the policy")]
        self.assertEqual(len(follow), 1, "\n".join(lines))
        m = re.search(r"on (\d+) of (\d+) problems", follow[0])
        self.assertGreaterEqual(int(m.group(1)), int(m.group(2)) // 2, follow[0])
        for l in cases:
            policy = l.split(" policy=")[1].split(":")[0] if " policy=" in l else "as_written"
            offload = policy.startswith("offload") or "offload" in l.split(":", 1)[1]
            if l.startswith("PASS"):
                self.assertFalse(offload, l)
                self.assertIn("residuals", l)  # the engine measured its saved bytes
            else:  # PyTorch 2 refuses offloading alone
                self.assertTrue(offload, "PyTorch %s: %s" % (version, l))
                self.assertIn("no PyTorch equivalent on CPU", l)
        passed = [l for l in cases if l.startswith("PASS")]
        problems = {l.split()[1].rstrip(":") for l in cases}
        for p in ("gpt", "moe", "resnet", "dot_policy", "scan_stack") + tuple(SELECTIVE_ON):
            self.assertIn(p, problems)
        selective_on = problems if FULL else set(SELECTIVE_ON)
        for policy in SELECTIVE:  # every problem it runs on passes under every selective policy
            self.assertEqual(len([l for l in passed if "policy=%s" % policy in l]), len(selective_on), policy)

if __name__ == "__main__":
    if PY is None:
        print("SKIPPED: PyTorch 2 is not installed: %s; tools/torch_engine.py is not tested" % WHY_NOT)
    unittest.main()
