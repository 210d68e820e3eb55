"""tools/torch_export.py's shapes-only export: a model built on the meta
device (no weights allocated), its token ids real, exports the program a
CPU export of the same model gives, without input files; `remat plan` of it
predicts the peak that a run of the real export measures, to the byte
(tools/examples/predict_peaks.py --confirm). Mixed devices and Python that
reads a value only real weights have are ExportErrors that say so.

Runs on PyTorch 2 and transformers from the workspace's environment
(tools/python_env.sh); skipped, and passed, without them.
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "examples"))
sys.path.insert(0, os.path.join(HERE, "testdata"))

import torch_export_test as base  # noqa: E402  (finds PyTorch 2: the workspace's .venv)

if base.HAVE_TORCH:
    import torch
    import torch.nn as nn
    from torch_export import ExportError, export
    import predict_peaks


def _program(text):
    """The program without its comment lines (the header differs)."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def _tiny_gpt2():
    """Hugging Face's GPT-2 at 2 layers of 32, checkpointing on, training."""
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32))
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return m.train()


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch 2 is not installed (tools/python_env.sh)")
class ShapesOnlyTest(unittest.TestCase):

    def both(self, make, inputs):
        """(real export's text, shapes-only export's text, its directory)."""
        torch.manual_seed(0)
        real = export(make(), inputs, tempfile.mkdtemp())
        with torch.device("meta"):
            model = make()
        d = tempfile.mkdtemp()
        shapes = export(model, inputs, d)
        self.assertEqual(os.listdir(d), ["program.txt"], "a shapes-only export writes no input files")
        self.assertIn("# shapes only", shapes)
        return real, shapes, d

    def test_nanogpt_gives_the_cpu_program(self):
        # Its attention is scaled_dot_product_attention(is_causal=True): on
        # the meta device PyTorch picks the math form, the CPU the fused
        # kernel; the export takes the CPU's choice.
        from nanogpt import GPT, GPTConfig
        config = GPTConfig(block_size=32, vocab_size=65, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                           checkpointed=True)
        ids = torch.randint(0, 65, (2, 32))
        real, shapes, _ = self.both(lambda: GPT(config).train(), (ids, ids))
        self.assertEqual(_program(real), _program(shapes))
        self.assertIn("masked_fill(", shapes)  # the fused kernel's causal mask, not the math form's bias

    def test_hugging_face_gpt2_gives_the_cpu_program(self):
        # Its mask code reads tensors in Python (`if (mask[:, -1] == 0).all()`)
        # and its loss shifts the labels: constants computed from the real
        # ids, so they are known; the ignore_index=-100 of the loss is
        # written only where a target holds it, as on the CPU.
        ids = torch.randint(0, 64, (2, 16))
        real, shapes, _ = self.both(_tiny_gpt2, {"input_ids": ids, "labels": ids})
        self.assertEqual(_program(real), _program(shapes))
        self.assertEqual(shapes.count(" = checkpoint("), 2)

    def test_weights_give_the_real_exports_input_files(self):
        # GPT-2 (tied embeddings, Conv1D weights, the mask and the shifted
        # labels computed beside the trace) and a ResNet block's convolution
        # and BatchNorm buffers, its images given on the meta device: the
        # shapes-only export with weights= writes the real export's files,
        # byte for byte, and its program.
        import numpy as np
        import torchvision
        ids = torch.randint(0, 64, (2, 16))
        images = torch.randn(2, 3, 32, 32)
        cases = [(_tiny_gpt2, lambda: {"input_ids": ids, "labels": ids}, {}, {}),
                 (lambda: torchvision.models.resnet18(num_classes=10).train(), lambda: (images,),
                  {"x": images}, dict(loss="sum"))]  # resnet's forward(x)
        for make, inputs, arguments, kwargs in cases:
            torch.manual_seed(0)
            model = make()
            real_dir, meta_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
            real = export(model, inputs(), real_dir, **kwargs)
            with torch.device("meta"):
                meta_model = make()
            meta_inputs = inputs()
            if isinstance(meta_inputs, tuple):
                meta_inputs = tuple(t.to("meta") for t in meta_inputs)
            weights = dict(model.state_dict(), **arguments)
            shapes = export(meta_model, meta_inputs, meta_dir, weights=weights, **kwargs)
            self.assertEqual(_program(real), _program(shapes))
            self.assertIn("its input files from the weights given", shapes)
            self.assertEqual(sorted(os.listdir(real_dir)), sorted(os.listdir(meta_dir)))
            for f in os.listdir(real_dir):
                if f.endswith(".npy"):
                    a, b = np.load(os.path.join(real_dir, f)), np.load(os.path.join(meta_dir, f))
                    self.assertEqual((a.dtype, a.shape), (b.dtype, b.shape), f)
                    self.assertTrue(np.array_equal(a, b), f)

    def test_weights_that_lack_an_input_or_a_real_model_are_errors(self):
        with torch.device("meta"):
            model = nn.Linear(4, 3)
        with self.assertRaisesRegex(ExportError, r"weights= lacks 1 of the program's inputs:\n  parameter 'bias' "
                                                 r"\(f32\[3\]\)"):
            export(model, (torch.empty(2, 4, device="meta"),), tempfile.mkdtemp(), loss="sum",
                   weights={"weight": torch.ones(3, 4), "input": torch.ones(2, 4)})
        with self.assertRaisesRegex(ExportError, "parameter 'weight': weights hold \\(4, 3\\), the model's is \\(3, 4\\)"):
            export(model, (torch.empty(2, 4, device="meta"),), tempfile.mkdtemp(), loss="sum",
                   weights={"weight": torch.ones(4, 3), "bias": torch.ones(3), "input": torch.ones(2, 4)})
        with self.assertRaisesRegex(ExportError, "weights= is for a model on the meta device"):
            export(nn.Linear(4, 3), (torch.randn(2, 4),), tempfile.mkdtemp(), loss="sum", weights={})

    def test_the_prediction_is_the_measurement(self):
        d = tempfile.mkdtemp()
        out = os.path.join(d, "rows.txt")
        with open(out, "w") as f:
            stdout, sys.stdout = sys.stdout, f
            try:
                predict_peaks.main(["nanogpt", "--batch", "2", "--tokens", "32", "--confirm",
                                    "--remat", os.path.join(HERE, "remat")])
            finally:
                sys.stdout = stdout
        with open(out) as f:
            text = f.read()
        self.assertIn("every measured peak equals its shapes-only prediction", text)
        self.assertEqual(text.count("| recompute"), 3, text)

    def test_mixed_devices_are_an_error(self):
        with torch.device("meta"):
            model = nn.Linear(4, 3)
        with self.assertRaisesRegex(ExportError, "parameter weight is on the meta device and input input is not"):
            export(model, (torch.randn(2, 4),), tempfile.mkdtemp(), loss="sum")

    def test_python_reading_a_weight_is_an_error(self):
        class Reads(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.ones(3))

            def forward(self, x):
                return (x * self.w).sum() if self.w.sum() > 0 else x.sum()
        with torch.device("meta"):
            model = Reads()
        with self.assertRaisesRegex(ExportError, "a shapes-only export has none"):
            export(model, (torch.empty(3, device="meta"),), tempfile.mkdtemp())


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
