"""tools/model_time.py and tools/real_models.py, at small sizes: an export
writes the program, its inputs and model.json, and --if-stale keeps it only
while the model, its sizes and the sources are the same; a model built with
and without checkpointing has the same weights and loss (PyTorch's peers
time the same model); ResNet-50's blocks become checkpoint regions; each
PyTorch engine times a step and prints its JSON; bad arguments are one line
naming them.

Runs on PyTorch 2, torchvision and transformers from the workspace's
environment (tools/python_env.sh); skipped, and passed, without them.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch_export_test as base  # noqa: E402  (finds PyTorch 2: the workspace's .venv)

if base.HAVE_TORCH:
    import torch
    import model_time
    import real_models


def _run(argv):
    """(exit code, stdout) of model_time.main(argv)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = model_time.main(argv)
    return code, out.getvalue()


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch 2 is not installed (tools/python_env.sh)")
class ModelTimeTest(unittest.TestCase):

    def test_an_export_is_kept_while_it_is_up_to_date(self):
        d = os.path.join(tempfile.mkdtemp(), "nanogpt")
        code, out = _run(["export", "nanogpt", d, "--batch", "1", "--tokens", "16", "--if-stale"])
        self.assertEqual(code, 0)
        self.assertIn("exported nanogpt", out)
        with open(os.path.join(d, "model.json")) as f:
            info = json.load(f)
        self.assertEqual((info["model"], info["batch"], info["tokens"]), ("nanogpt", 1, 16))
        self.assertEqual(info["sources"], model_time.sources_digest())
        self.assertGreater(info["parameters"], 0)
        with open(os.path.join(d, "program.txt")) as f:
            self.assertIn("= checkpoint(", f.read())  # nanoGPT's blocks, as written
        self.assertTrue(os.path.exists(os.path.join(d, "idx.npy")))
        code, out = _run(["export", "nanogpt", d, "--batch", "1", "--tokens", "16", "--if-stale"])
        self.assertIn("is up to date", out)
        # Another size, or a changed source, is exported again; an old
        # export's files go (a stray <input>.npy would be read as an input).
        open(os.path.join(d, "stray.npy"), "w").close()
        open(os.path.join(d, "notes.txt"), "w").close()
        code, out = _run(["export", "nanogpt", d, "--batch", "2", "--tokens", "16", "--if-stale"])
        self.assertIn("exported nanogpt", out)
        self.assertFalse(os.path.exists(os.path.join(d, "stray.npy")))
        self.assertTrue(os.path.exists(os.path.join(d, "notes.txt")), "only an export's own files go")
        info["sources"] = "0" * 16
        info["batch"] = 2
        with open(os.path.join(d, "model.json"), "w") as f:
            json.dump(info, f)
        code, out = _run(["export", "nanogpt", d, "--batch", "2", "--tokens", "16", "--if-stale"])
        self.assertIn("exported nanogpt", out)

    def test_the_peers_model_is_the_exported_one(self):
        # With and without checkpointing: the same weights, inputs and loss.
        for name, batch, tokens in (("nanogpt", 1, 16), ("llama-100m", 1, 8), ("resnet50", 2, 32)):
            a = real_models.build(name, batch, tokens, checkpointed=True)
            b = real_models.build(name, batch, tokens, checkpointed=False)
            for (pa, ta), (pb, tb) in zip(a.module.state_dict().items(), b.module.state_dict().items()):
                self.assertTrue(torch.equal(ta, tb), "%s: %s differs from %s" % (name, pa, pb))
            with torch.no_grad():
                self.assertEqual(float(a.step()), float(b.step()), name)

    def test_resnet50s_blocks_are_regions(self):
        d = tempfile.mkdtemp()
        code, _ = _run(["export", "resnet50", d, "--batch", "2", "--tokens", "32"])
        self.assertEqual(code, 0)
        with open(os.path.join(d, "program.txt")) as f:
            self.assertEqual(f.read().count("= checkpoint("), 16)  # 3 + 4 + 6 + 3 Bottlenecks

    def test_a_meta_export_writes_the_real_exports_files(self):
        # The trace on the meta device, the files from the CPU model's
        # weights: the same program and the same bytes, ResNet-50's
        # checkpoint wrapper's parameter names and its images included.
        import numpy as np
        for name, batch, tokens in (("nanogpt", 1, 16), ("resnet50", 2, 32)):
            real, meta = tempfile.mkdtemp(), tempfile.mkdtemp()
            args = ["--batch", str(batch), "--tokens", str(tokens)]
            self.assertEqual(_run(["export", name, real] + args)[0], 0)
            self.assertEqual(_run(["export", name, meta, "--meta"] + args)[0], 0)
            with open(os.path.join(real, "program.txt")) as f, open(os.path.join(meta, "program.txt")) as g:
                strip = (lambda text: [line for line in text.splitlines() if not line.startswith("#")])
                self.assertEqual(strip(f.read()), strip(g.read()), name)
            files = sorted(f for f in os.listdir(real) if f.endswith(".npy"))
            self.assertEqual(files, sorted(f for f in os.listdir(meta) if f.endswith(".npy")), name)
            for f in files:
                self.assertTrue(np.array_equal(np.load(os.path.join(real, f)), np.load(os.path.join(meta, f))),
                                "%s: %s" % (name, f))
            with open(os.path.join(meta, "model.json")) as f:
                self.assertTrue(json.load(f)["meta"])
            # Shapes only: the same program, no input file; a stale-check
            # tells it from a full export of the same size.
            shapes = tempfile.mkdtemp()
            self.assertEqual(_run(["export", name, shapes, "--shapes-only"] + args)[0], 0)
            with open(os.path.join(real, "program.txt")) as f, open(os.path.join(shapes, "program.txt")) as g:
                self.assertEqual(strip(f.read()), strip(g.read()), name)
            self.assertEqual(sorted(os.listdir(shapes)), ["model.json", "program.txt"], name)
            with open(os.path.join(shapes, "model.json")) as f:
                self.assertTrue(json.load(f)["shapes_only"])
            code, out = _run(["export", name, shapes, "--if-stale"] + args)
            self.assertNotIn("up to date", out)
            self.assertTrue(files and all(os.path.exists(os.path.join(shapes, f)) for f in files), name)

    def test_each_engine_times_a_step(self):
        for engine in model_time.ENGINES:
            code, out = _run(["time", "nanogpt", "--engine", engine, "--batch", "1", "--tokens", "16",
                              "--repeats", "2"])
            self.assertEqual(code, 0, engine)
            j = json.loads(out.strip().splitlines()[-1])
            self.assertEqual((j["engine"], j["model"], len(j["times_ms"])), (engine, "nanogpt", 2))
            self.assertEqual(j["min_ms"], min(j["times_ms"]))
            self.assertGreater(j["peak_rss_bytes"], 0)
            self.assertTrue(j["version"].startswith("PyTorch 2"))

    def test_max_seconds_stops_the_timed_steps_after_one_at_least(self):
        code, out = _run(["time", "nanogpt", "--engine", "torch", "--batch", "1", "--tokens", "16",
                          "--repeats", "50", "--max-seconds", "1e-9"])
        self.assertEqual(code, 0)
        self.assertEqual(len(json.loads(out.strip().splitlines()[-1])["times_ms"]), 1)

    def test_bad_arguments_are_one_line_naming_them(self):
        for argv, message in ((["time", "vgg", "--engine", "torch"], "no model 'vgg'; models: gpt2"),
                              (["time", "gpt2", "--engine", "jax"], "invalid choice: 'jax'"),
                              (["export", "gpt2", "/tmp/x", "--batch", "0"], "--batch=0: must be positive"),
                              (["export", "gpt2", "/tmp/x", "--meta", "--shapes-only"],
                               "not allowed with argument"),
                              (["time", "gpt2", "--engine", "torch", "--repeats", "0"],
                               "--repeats=0: must be positive"),
                              (["time", "gpt2", "--engine", "torch", "--max-seconds", "0"],
                               "--max-seconds=0: must be positive")):
            done = subprocess.run([sys.executable, os.path.join(HERE, "model_time.py")] + argv,
                                  capture_output=True, text=True)
            self.assertEqual(done.returncode, 2, argv)
            self.assertIn(message, done.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
