"""tools/examples/model_sweep.py: its command line and how it reports a
model that stopped (the sweep itself runs for hours: not here)."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import model_sweep  # noqa: E402

SWEEP = os.path.join(HERE, "model_sweep.py")


class ModelSweepTest(unittest.TestCase):

    def test_list_names_every_model_once(self):
        r = subprocess.run([sys.executable, SWEEP, "--list"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = r.stdout.split()
        self.assertEqual(names, list(model_sweep.MODELS))
        self.assertEqual(len(names), len(set(names)))
        for name in ("mamba", "hf.swin", "tv.resnext50", "timm.tnt_s_patch16_224"):
            self.assertIn(name, names)

    def test_an_unknown_model_is_an_error_naming_it(self):
        r = subprocess.run([sys.executable, SWEEP, "mamba", "no_such_model"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no model 'no_such_model' (--list names them)", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_the_reason_is_the_exception_that_ended_the_run(self):
        stderr = "\n".join([
            "some warning",
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "torch_export_errors.ExportError: 2 uses in the model are not supported:",
            "  a.b (aten.maximum.default): no mapping | here",
            "  a.c (aten.maximum.default): no mapping",
        ])
        self.assertEqual(model_sweep._reason(stderr),
                         "torch_export_errors.ExportError: 2 uses in the model are not supported: / "
                         "a.b (aten.maximum.default): no mapping \\| here / a.c (aten.maximum.default): no mapping")
        self.assertEqual(model_sweep._reason("AssertionError: loss: remat 0.1 from float64"),
                         "AssertionError: loss: remat 0.1 from float64")


if __name__ == "__main__":
    unittest.main()
