"""tools/torch_export_regions.py: every torch.utils.checkpoint call is a region.

torchvision's resnet18 with its four stages checkpointed the ways users
write it (from an overridden _forward_impl, with checkpoint imported inside
the function, as functools.partial(checkpoint, use_reentrant=False) bound at
module level, stored on the module as an attribute, reentrant, and
checkpoint_sequential) exports with 4 regions named by the stages, and
remat's loss, gradients and new BatchNorm statistics (recompute engine) are
PyTorch autograd's. A call the program cannot keep is an ExportError naming
it; ops returning tuples (qkv.unbind(0), nn.MultiheadAttention) never give
a raw TypeError.

Runs on PyTorch 2 and torchvision from the workspace's environment
(tools/python_env.sh); skipped, and passed, without them.
"""

import functools
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch_export_test as base  # noqa: E402  (its helpers; a module, so its tests do not run here)

HAVE_TORCH, RTOL = base.HAVE_TORCH, base.RTOL

if HAVE_TORCH:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.utils.checkpoint
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential
    from torch_export import ExportError, export
    try:
        import torchvision
        from torchvision.models.resnet import ResNet, BasicBlock
    except ImportError:
        torchvision = None

    # Bound once at module level, as users write it.
    _CHECKPOINT = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)

    def _stages(model):
        return [model.layer1, model.layer2, model.layer3, model.layer4]

    if torchvision is not None:
        class _Base(ResNet):
            """resnet18; _staged runs its stages through call(stage, x)."""

            def __init__(self):
                super().__init__(BasicBlock, [2, 2, 2, 2], num_classes=10)

            def _staged(self, x, call):
                x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
                for stage in _stages(self):
                    x = call(stage, x)
                return self.fc(torch.flatten(self.avgpool(x), 1))

        class OverriddenForwardImpl(_Base):
            def _forward_impl(self, x):
                return self._staged(x, lambda stage, h: checkpoint(stage, h, use_reentrant=False))

        class ImportedInside(_Base):
            def _forward_impl(self, x):
                from torch.utils.checkpoint import checkpoint as cp
                return self._staged(x, lambda stage, h: cp(stage, h, use_reentrant=False))

        class PartialAtModuleLevel(_Base):
            def _forward_impl(self, x):
                return self._staged(x, _CHECKPOINT)

        class StoredAsAttribute(_Base):
            def __init__(self):
                super().__init__()
                self.checkpoint_fn = torch.utils.checkpoint.checkpoint

            def _forward_impl(self, x):
                return self._staged(x, lambda stage, h: self.checkpoint_fn(stage, h, use_reentrant=False))

        class Reentrant(_Base):
            def _forward_impl(self, x):
                return self._staged(x, lambda stage, h: checkpoint(stage, h, use_reentrant=True))

        class Sequential(_Base):
            def _forward_impl(self, x):
                x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
                # 5 segments of the 4 stages and the average pool: 4 regions
                # (checkpoint_sequential runs its last segment inline).
                body = nn.Sequential(*_stages(self), self.avgpool)
                x = checkpoint_sequential(body, 5, x, use_reentrant=False)
                return self.fc(torch.flatten(x, 1))


@unittest.skipIf(not HAVE_TORCH, "PyTorch is not installed: tools/torch_export_regions.py is not tested")
class RegionsTest(unittest.TestCase):

    remat = base.TorchExportTest.remat
    grads_match = base.TorchExportTest.grads_match
    resnet18_matches = base.TorchExportTest.resnet18_matches

    def test_resnet18_checkpoint_calls_are_regions_however_reached(self):
        if torchvision is None:
            self.skipTest("torchvision is not installed (tools/python_env.sh installs it with PyTorch 2)")
        for cls in (OverriddenForwardImpl, ImportedInside, PartialAtModuleLevel, StoredAsAttribute, Reentrant,
                    Sequential):
            with self.subTest(model=cls.__name__):
                torch.manual_seed(12)
                model = cls().train()
                x, targets = torch.randn(2, 3, 64, 64), torch.tensor([3, 7])
                d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
                text = export(model, (x,), d, loss=F.cross_entropy, loss_inputs=(targets,))
                self.assertEqual(text.count(" = checkpoint("), 4, text)
                for i in range(1, 5):
                    self.assertIn('name="layer%d" policy="nothing_saveable"' % i, text)
                self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d,
                           "--engine", "recompute", "--dump", out)
                self.resnet18_matches(model, x, targets, out)

    def test_a_call_the_program_cannot_keep_is_named(self):
        class Unused(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

            def forward(self, x):
                checkpoint(self.b, x, use_reentrant=False)  # its value is dropped
                return checkpoint(self.a, x, use_reentrant=False).sum()

        with self.assertRaisesRegex(ExportError, r"the model made 2 checkpoint calls; 1 are regions of the "
                                    r"program, 1 are not:\n  checkpoint region b \(called at .*"
                                    r"torch_export_regions_test.py:\d+\): its output does not reach the loss"):
            export(Unused(), (torch.randn(2, 4),), tempfile.mkdtemp())

    def test_a_region_with_several_values_used_after_it_returns_them_packed(self):
        # T5's first block returns its hidden states and the position bias
        # the later blocks reuse: one region, its values flattened and
        # joined by cat, sliced and reshaped back after it.
        class Pair(nn.Linear):
            def both(self, x):
                y = torch.tanh(super().forward(x))
                return y, (y * 2).reshape(2, 2, 2), x.sum(0)

            def forward(self, x):
                y, z, s = checkpoint(self.both, x, use_reentrant=False)
                return (y.square().sum() + z[:, 0].sum() * y.sum() + (s * y).sum())

        torch.manual_seed(13)
        model, x = Pair(4, 4), torch.randn(2, 4)
        d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        text = export(model, (x,), d)
        self.assertEqual(text.count(" = checkpoint("), 1, text)
        self.assertIn("f32[20] = checkpoint(", text)
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--engine", "recompute",
                   "--dump", out)
        model(x).backward()
        self.grads_match(out, model)

    def test_none_and_non_tensor_arguments(self):
        # Hugging Face passes None and Python values through checkpoint.
        class Layer(nn.Linear):
            def forward(self, x, mask=None, scale=1.0, flag=False):
                assert mask is None and not flag
                return torch.relu(super().forward(x)) * scale

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(Layer(4, 4) for _ in range(3))

            def forward(self, x):
                for layer in self.layers:
                    x = checkpoint(layer, x, None, 2.0, False, use_reentrant=False)
                return x.sum()

        torch.manual_seed(13)
        m = Model()
        x = torch.randn(3, 4)
        d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        text = export(m, (x,), d)
        self.assertEqual(text.count(" = checkpoint("), 3)
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--engine", "recompute",
                   "--dump", out)
        loss = m(x)
        loss.backward()
        self.assertLessEqual(abs(float(np.load(os.path.join(out, "loss.npy"))) - loss.item()),
                             RTOL * 4 * abs(loss.item()))
        self.grads_match(out, m)

    def test_tuple_valued_ops_never_give_a_raw_error(self):
        # ViT's qkv.unbind(0) and nn.MultiheadAttention return tuples: the
        # export maps them or names what it cannot take, never a TypeError.
        class Unbind(nn.Linear):  # the qkv projection
            def forward(self, x):
                b, t, c = x.shape
                q, k, v = super().forward(x).reshape(b, t, 3, 2, c // 2).permute(2, 0, 3, 1, 4).unbind(0)
                return F.scaled_dot_product_attention(q, k, v).sum()

        class Mha(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

            def forward(self, x):
                y, _ = self.attn(x, x, x, need_weights=False)
                return y.sum()

        for model in (Unbind(8, 24), Mha()):
            with self.subTest(model=type(model).__name__):
                try:
                    text = export(model.train(), (torch.randn(2, 5, 8),), tempfile.mkdtemp())
                except ExportError as e:
                    self.assertRegex(str(e), r"^\d+ uses? in the model")
                else:
                    self.assertIn("matmul(", text)
                    if isinstance(model, Unbind):
                        self.assertEqual(text.count(" = select("), 3, text)


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
