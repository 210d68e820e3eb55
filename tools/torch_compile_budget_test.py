"""tools/torch_compile_budget.py on two problems at small sizes, on PyTorch 2.

Needs PyTorch 2 with functorch (the workspace's .venv: tools/python_env.sh;
$REMAT_VENV names another); without it, says so and passes. Checks what the
comparison's numbers must satisfy whatever the planners decide (monotone in
B, remat within torch.compile's activation bytes, nothing recomputed at
B = 1, everything recomputable at B = 0), and, on layer_loss, the bytes each
side's op rules fix: PyTorch keeps relu's output, remat relu's input.
"""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
N, D = 32, 64  # layer_loss's sizes here: an activation is N * D * 4 bytes


def torch2_python():
    venv = os.environ.get("REMAT_VENV") or os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                                                        ".venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py) and subprocess.run(
            [py, "-c", "import torch, numpy, functorch.compile; assert not torch.__version__.startswith('1.')"],
            capture_output=True).returncode == 0:
        return py
    return None


PY = torch2_python()


@unittest.skipIf(PY is None, "PyTorch 2 is not installed in .venv (tools/python_env.sh): skipped")
class TorchCompileBudgetTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cmd = [PY, os.path.join(HERE, "torch_compile_budget.py"), "--remat", os.path.join(HERE, "remat"),
               "--problems", "layer_loss,gpt", "--param", "layer_loss:N=%d" % N, "--param", "layer_loss:d=%d" % D,
               "--param", "gpt:L=2", "--param", "gpt:T=16", "--param", "gpt:D=32"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        print(r.stdout, r.stderr)
        if r.returncode != 0:
            raise AssertionError("%s exited %d:\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
        lines = [l for l in r.stdout.splitlines() if l and not l.startswith("#")]
        header = lines[0].split("\t")
        cls.rows = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split("\t")))
            for k in row:
                if k.startswith(("torch_", "remat_")) and not k.startswith("remat_plan"):
                    row[k] = int(row[k])
            cls.rows.setdefault(row["problem"], []).append(row)

    def test_every_problem_at_every_budget(self):
        self.assertEqual(sorted(self.rows), ["gpt", "layer_loss"])
        for problem, rows in self.rows.items():
            self.assertEqual([r["budget"] for r in rows], ["0", "0.25", "0.5", "0.75", "1"], problem)

    def test_what_holds_whatever_the_planners_decide(self):
        for problem, rows in self.rows.items():
            for lo, hi in zip(rows, rows[1:]):  # by increasing B
                self.assertLessEqual(lo["torch_saved_bytes"], hi["torch_saved_bytes"], problem)
                self.assertGreaterEqual(lo["torch_recomputed_flops"], hi["torch_recomputed_flops"], problem)
                self.assertLessEqual(lo["remat_saved_bytes"], hi["remat_saved_bytes"], problem)
                self.assertGreaterEqual(lo["remat_recomputed_flops"], hi["remat_recomputed_flops"], problem)
            for r in rows:
                where = "%s B=%s" % (problem, r["budget"])
                self.assertLessEqual(r["remat_saved_bytes_at_torch_bytes"],
                                     r["torch_saved_bytes"] - r["torch_saved_mask_bytes"], where)
                self.assertLessEqual(r["remat_saved_bytes"], float(r["budget"]) * r["remat_max_saved_bytes"], where)
                self.assertLessEqual(r["remat_recomputed_flops"], r["remat_recomputed_flops_all_ops"], where)
                self.assertIn("proven optimal", r["remat_plan_at_torch_bytes"], where)
            self.assertEqual(rows[-1]["torch_recomputed_flops"], 0, problem)
            self.assertEqual(rows[-1]["remat_recomputed_flops"], 0, problem)
            self.assertGreater(rows[0]["torch_recomputed_flops"], 0, problem)
            self.assertGreater(rows[0]["remat_recomputed_flops"], 0, problem)

    def test_layer_loss_bytes_follow_each_sides_rules(self):
        # relu(x@w1) -> relu(.@w2) -> @w3 -> sum of squares. PyTorch keeps
        # both relu outputs and the last matmul's output (3 activations);
        # remat keeps relu's input too (5). Weights' transposes are views of
        # inputs: not counted. At B = 0 both recompute all three forward
        # matmuls, 3 * 2 N D D FLOPs.
        rows = self.rows["layer_loss"]
        act = N * D * 4
        self.assertEqual(rows[-1]["torch_saved_bytes"], 3 * act)
        self.assertEqual(rows[-1]["remat_saved_bytes"], 5 * act)
        self.assertEqual(rows[0]["torch_recomputed_flops"], 3 * 2 * N * D * D)
        self.assertEqual(rows[0]["remat_recomputed_flops"], 3 * 2 * N * D * D)

    def test_dropout_masks_count_on_torchs_side(self):
        rows = self.rows["gpt"]
        self.assertGreater(rows[0]["torch_saved_mask_bytes"], 0)
        self.assertEqual(len({r["torch_saved_mask_bytes"] for r in rows}), 1, "the masks are saved at every B")


if __name__ == "__main__":
    if PY is None:
        print("SKIPPED: PyTorch 2 is not installed in .venv; tools/torch_compile_budget.py is not tested")
    unittest.main()
