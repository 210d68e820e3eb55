"""tools/torch_export_ops.py: ops that vision libraries write and that map to
a composition of remat's ops, each against PyTorch's autograd (loss and
every gradient, the input's too), and the refusals that stay:

- stochastic depth (torchvision's StochasticDepth, timm's drop_path): one
  draw per sample, the contract's dropout of ones broadcast by a product;
  eager and recompute give the same bits;
- dropout of a constant (Funnel's sinusoid tables): the contract's mask;
- dropout written by hand from torch.rand (Hugging Face's drop path,
  floor(keep + rand); rand() > p), the contract's mask; other noise refused;
- hardswish and hardsigmoid (MobileNetV3) as relu6(x + 3) / 6;
- avg_pool2d whose windows tile the input (DenseNet's transitions), as
  adaptive average pooling; any other (PoolFormer's, NFNet's ceil_mode) as
  a depthwise conv of ones and a divisor; adaptive pooling to a larger size;
- group_norm, var and std, F.normalize and clamps, repeat, baddbmm, a conv
  of a constant, batch norm over rank 2 and 3 and without affine;
- writes into a slice or a row of a live value (Swin V2's zeroed bias, a
  buffer filled by assignments), written back into its base, and a
  constant mask built by such writes, read as written;
- softmax and log_softmax over an axis other than the last (SKNet's and
  ResNeSt's over their branches);
- max_pool2d with ceil_mode (SqueezeNet), by -inf rows and columns;
- an in-place write into a view whose base is never read again (an
  in-place dropout on flatten's output) is a plain op; one whose base is
  read later is refused, naming the module;
- as_strided that reads every element in order (adaptive pooling to the
  input's own size) as a reshape; any other (HaloNet's overlapping
  windows, a transposed input's storage order) and Tensor.unfold as a
  gather of the elements each reads;
- F.unfold (TNT) as a depthwise conv of one-hot kernels, F.fold (VOLO) as
  its taps spread and added;
- softplus (Mamba) from exp and log, accurate where exp(x) is below
  epsilon, and mish by PyTorch's decomposition over it; leaky_relu and
  clamps with PyTorch's gradient exactly at the kink (zero-initialised
  BatchNorms put every element there);
- nearest upsampling (F.interpolate) and indices on adjacent axes that
  form an outer product, one gather per axis; any other constant indices
  and torch.gather (Funnel) as a gather of single elements;
- Swin's: a table read by constant indices (embedding's gather), roll
  (slices and cat), constant padding and cropping (cat and slice);
- buffers whose names hold characters remat's ids do not (RegNet's
  "block1-0") keep their BatchNorm state.

Needs PyTorch 2 (skipped, and passed, without it: tools/torch_export_test.py).
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch_export_test as base  # noqa: E402  (its helpers; a module, so its tests do not run here)

if base.HAVE_TORCH:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch_export import ExportError, export


def _loss_of(net):
    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return (self.net(x) ** 2).sum()
    return Loss()


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch 2 is not installed: tools/torch_export.py is not tested")
class OpsTest(unittest.TestCase):

    remat = base.TorchExportTest.remat
    run_remat = base.TorchExportTest.run_remat
    check = base.TorchExportTest.check

    def dump(self, d, engine):
        out = tempfile.mkdtemp()
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--engine", engine,
                   "--dump", out)
        return {f: np.load(os.path.join(out, f)).tobytes() for f in os.listdir(out) if f.endswith(".npy")}

    def test_hardswish_and_hardsigmoid(self):
        torch.manual_seed(3)
        net = nn.Sequential(nn.Linear(8, 16), nn.Hardswish(), nn.Linear(16, 16), nn.Hardsigmoid())
        # Values on both sides of -3 and 3, none on a kink.
        x = torch.randn(6, 8) * 4
        self.check(_loss_of(net), x, params_only=True)

    def test_avg_pool_that_tiles_and_one_that_drops_a_row(self):
        torch.manual_seed(4)
        for size in (8, 9):  # 9: floor mode drops the last row and column
            net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AvgPool2d(2, 2), nn.ReLU())
            self.check(_loss_of(net), torch.randn(2, 3, size, size))

    def test_avg_pool_with_overlapping_padded_and_ceil_mode_windows(self):
        # PoolFormer's token mixer (3x3, stride 1, padded, the padding not
        # counted), a padded stride-2 pool that counts it, NFNet's
        # ceil_mode downsampling on an odd size, and a divisor override.
        class PoolFormerMixer(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3, padding=1)
                self.pool = nn.AvgPool2d(3, 1, padding=1, count_include_pad=False)

            def forward(self, x):
                y = self.conv(x)
                return self.pool(y) - 0.5 * y  # - y: a bias that cancels, its gradient 0 up to rounding

        torch.manual_seed(10)
        for pool, size in ((None, 7), (nn.AvgPool2d(3, 2, padding=1), 8),
                           (nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False), 9),
                           (nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, divisor_override=3), 8)):
            net = PoolFormerMixer() if pool is None else nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), pool)
            self.check(_loss_of(net), torch.randn(2, 3, size, size), params_only=True)

    def test_conv1d(self):
        # Whisper's front end (two conv1d, the second strided), a depthwise
        # causal conv1d as Mamba's (padding, groups = channels, cropped).
        class Audio(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv1d(3, 6, 3, padding=1)
                self.conv2 = nn.Conv1d(6, 6, 3, stride=2, padding=1)
                self.dw = nn.Conv1d(6, 6, 4, groups=6, padding=3, bias=False)

            def forward(self, x):
                y = F.gelu(self.conv2(F.gelu(self.conv1(x))))
                return self.dw(y)[..., :y.shape[-1]]

        torch.manual_seed(16)
        self.check(_loss_of(Audio()), torch.randn(2, 3, 10), params_only=True)

    def test_adaptive_pool_to_a_larger_size(self):
        # VGG's and AlexNet's heads on a small image: 2x3 pooled to 7x5.
        torch.manual_seed(11)
        net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d((7, 5)), nn.Flatten(),
                            nn.Linear(140, 3))
        self.check(_loss_of(net), torch.randn(2, 3, 2, 3), params_only=True)

    def test_group_norm_and_variances_written_by_hand(self):
        # PoolFormer's GroupNorm(1, C), GroupNorm with 2 groups and no
        # affine, and a layer norm as users write it (var, std).
        class Norms(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3, padding=1)
                self.g1, self.g2 = nn.GroupNorm(1, 4), nn.GroupNorm(2, 4, affine=False)
                self.w = nn.Parameter(torch.randn(5))

            def forward(self, x):
                y = self.g2(self.g1(self.conv(x)))
                z = y.flatten(2)[..., :5]
                ln = (z - z.mean(-1, keepdim=True)) / torch.sqrt(z.var(-1, keepdim=True, unbiased=False) + 1e-6)
                return ln * self.w + z.std(dim=(0, 1)) * y.var()

        torch.manual_seed(12)
        self.check(_loss_of(Norms()), torch.randn(2, 3, 5, 5), params_only=True)

    def test_normalize_clamp_repeat_and_a_learned_conv_of_a_constant(self):
        # Swin V2's and XCiT's cosine attention (F.normalize: a 2-norm and
        # clamp_min), clamps by numbers, XCiT's Fourier features through a
        # learned conv repeated over the batch, BLOOM's baddbmm.
        class Parts(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(6, 6)
                self.pos = nn.Conv2d(4, 6, 1)
                self.register_buffer("alibi", torch.linspace(-1, 1, 3).reshape(1, 1, 3))
                self.register_buffer("zero_row", torch.tensor([1.0, 0.0, 1.0]).reshape(1, 3, 1))

            def forward(self, x):
                q = F.normalize(self.proj(x) * self.zero_row, dim=-1)  # an all-zero row: its gradient is 0
                scores = torch.baddbmm(self.alibi.expand(2, 3, 3), q, q.transpose(1, 2), alpha=0.5)
                feats = torch.linspace(0, 1, 36).reshape(1, 4, 3, 3)
                pos = self.pos(feats).repeat(2, 1, 1, 1).flatten(2).transpose(1, 2)[:, :3]  # (2, 3, 6)
                y = scores @ (q + pos)
                return y.clamp(min=-0.4, max=0.9) + y.clamp_min(0.1) * y.clamp_max(-0.2) + y.clamp(-1, 1)

        torch.manual_seed(13)
        self.check(_loss_of(Parts()), torch.randn(2, 3, 6), params_only=True)
        class OneNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)

            def forward(self, x):
                return torch.linalg.vector_norm(self.fc(x), ord=1)

        with self.assertRaises(ExportError) as caught:
            export(OneNorm(), (torch.randn(2, 3),), tempfile.mkdtemp())
        self.assertIn("<root> (aten.linalg_vector_norm.default): linalg_vector_norm(ord=1)", str(caught.exception))

    def test_batch_norm_over_rank_2_and_3_and_without_affine(self):
        # LeViT's BatchNorm1d on (N, C) rows, a BatchNorm1d over a sequence,
        # one without affine parameters, and NFNet's weight standardization
        # (F.batch_norm of a conv's weight, no running statistics).
        class Norms(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(5, 4, bias=False)  # a bias before batch norm cancels
                self.b2, self.b3 = nn.BatchNorm1d(4), nn.BatchNorm1d(3, affine=False)
                self.conv = nn.Conv2d(2, 4, 3, bias=False)
                self.gain = nn.Parameter(torch.rand(4) + 0.5)

            def forward(self, x):
                rows = self.b2(self.fc(x.flatten(0, 1)))     # (6, 4)
                seq = self.b3(rows.reshape(2, 3, 4))         # (2, 3, 4): 3 channels, 4 steps
                w = F.batch_norm(self.conv.weight.reshape(1, 4, -1), None, None, weight=self.gain,
                                 training=True, momentum=0.0, eps=1e-5).reshape_as(self.conv.weight)
                img = F.conv2d(seq[:, :2].reshape(2, 2, 4, 1).expand(2, 2, 4, 3), w)
                return torch.cat([seq.flatten(1), img.flatten(1)], 1)

        torch.manual_seed(14)
        net = Norms().train()
        d = tempfile.mkdtemp()
        text = export(_loss_of(net), (torch.randn(2, 3, 5),), d)
        self.assertIn('name="net.b2.running_var"', text)
        self.assertIn('name="net.b3.running_mean"', text)
        self.check(_loss_of(Norms().train()), torch.randn(2, 3, 5), params_only=True)

    def test_writes_into_a_slice_or_a_row_of_a_value(self):
        # Swin V2's qkv_bias.clone() with its middle third zeroed, and a
        # buffer filled by slice and row assignments (out[:, :d] = y).
        class Writes(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 6)

            def forward(self, x):
                b = self.fc.bias.clone()
                b[2:4].zero_()
                y = F.linear(x, self.fc.weight, b)
                out = x.new_zeros(3, 8)
                out[:, :6] = y.tanh()
                out[:, 7] = y[:, 0] * 2
                out[1] = 0.5
                # A constant built by writes into its views (Swin's shifted-
                # window mask): read with its contents after them, not as
                # made (a silent zeros before).
                mask = torch.zeros(3, 8)
                mask[:, 2:5] = 1.0
                mask[0] = 3.0
                mask[1:, 6:][0, 1] = -2.0
                return out * mask + out

        torch.manual_seed(15)
        self.check(_loss_of(Writes()), torch.randn(3, 4), params_only=True)

    def test_a_write_into_a_view_whose_base_is_gone(self):
        # Funnel's relative shift: a matmul's result reshaped and sliced,
        # the slice scaled in place, the matmul's own tensor never read
        # again and gone when its function returns. A trace that lets
        # tensors die sees later tensors take its id; a later read of one
        # of them is not a read of the written storage (it was refused as
        # one, by id, when the trace held weak references).
        class Shift(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(16, 16) / 4)

            def shifted(self, x):
                a = x @ self.w
                b = a.reshape(4, 32, 8)[:, 1:, :].reshape(4, 31 * 8)[:, :240]
                b *= 0.5
                return b

            def forward(self, x):
                for _ in range(6):
                    x = torch.tanh(self.shifted(x).reshape(4, 15, 16) + x[:, :15, :].mean()).sum(1, keepdim=True) + x
                return x

        torch.manual_seed(16)
        self.check(_loss_of(Shift()), torch.randn(4, 16, 16), params_only=True)

    def test_max_pool_ceil_mode(self):
        torch.manual_seed(5)
        for size, kernel, stride, padding in ((10, 3, 2, 0), (9, 2, 2, 0), (12, 3, 2, 1)):
            net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1),
                                nn.MaxPool2d(kernel, stride, padding=padding, ceil_mode=True))
            x = torch.randn(2, 3, size, size)
            self.assertNotEqual(net(x).shape, F.max_pool2d(net[0](x), kernel, stride, padding).shape,
                                "the case has a window past the edge")
            self.check(_loss_of(net), x, params_only=True)

    def test_softmax_and_log_softmax_over_any_axis(self):
        # SKNet's and ResNeSt's attention over their branches is a softmax
        # over dim 1: swapped to the last axis and back.
        class Branches(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 6, 3, padding=1)

            def forward(self, x):
                y = self.conv(x).reshape(2, 2, 3, 4, 4)
                a = torch.softmax(y, dim=1)
                return (a * y).sum(1) + F.log_softmax(y.mean((3, 4)), dim=0).sum()

        torch.manual_seed(16)
        self.check(_loss_of(Branches()), torch.randn(2, 3, 4, 4))

    def test_adaptive_pool_to_its_own_size_is_a_reshape(self):
        torch.manual_seed(6)
        net = nn.Sequential(nn.Conv2d(3, 4, 4, stride=4), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
        self.check(_loss_of(net), torch.randn(2, 3, 4, 4))

    def test_overlapping_strided_windows_and_tensor_unfold(self):
        # HaloNet's key/value windows: as_strided over a padded map, each
        # element read by up to four windows; here over a transposed
        # (non-contiguous) value, whose storage order is not its own.
        class Windows(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 2, 1)

            def forward(self, x):
                y = F.pad(self.conv(x), (1, 1, 1, 1))  # (2, 2, 6, 7)
                win = y.as_strided((2, 2, 2, 3, 4, 3), (84, 42, 14, 2, 7, 1))  # 2x3 grid of 4x3 windows
                t = self.conv(x).transpose(2, 3)  # (2, 2, 5, 4), strides (40, 20, 1, 5)
                diag = t.as_strided((2, 2, 4), (40, 20, 6))  # t[:, :, i, i]: storage steps of 6
                rows = y.unfold(2, 3, 2).unfold(3, 2, 3)  # Tensor.unfold: (2, 2, 2, 2, 3, 2)
                return win.tanh().sum((3, 4, 5)).sum(-1) + diag.square().sum(-1) + rows.sin().sum((2, 3, 4, 5))

        torch.manual_seed(6)
        self.check(_loss_of(Windows()), torch.randn(2, 3, 4, 5), params_only=True)

    def test_in_place_dropout_on_a_view(self):
        # EfficientNet's classifier: Dropout(inplace=True) on flatten's view.
        class Head(nn.Module):
            def __init__(self, base_read_later):
                super().__init__()
                self.fc = nn.Linear(16, 4)
                self.drop = nn.Dropout(0.25, inplace=True)
                self.base_read_later = base_read_later

            def forward(self, x):
                pooled = x.mean((2, 3), keepdim=True)
                y = self.fc(self.drop(torch.flatten(pooled, 1))).sum()
                return y + pooled.sum() if self.base_read_later else y

        x = torch.randn(2, 16, 4, 4)
        d = tempfile.mkdtemp()
        text = export(Head(False).train(), (x,), d)
        self.assertIn(" = dropout(", text)
        self.assertEqual(self.dump(d, "eager"), self.dump(d, "recompute"))
        with self.assertRaises(ExportError) as caught:
            export(Head(True).train(), (x,), tempfile.mkdtemp())
        self.assertIn("drop (aten.mul.Tensor): an in-place write into a tensor that shares its storage",
                      str(caught.exception))

    def test_dropout_of_a_constant(self):
        # Funnel's sinusoid tables, made in forward, go through dropout.
        class Table(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
                self.drop = nn.Dropout(0.25)

            def forward(self, x):
                table = torch.sin(torch.arange(8.0) / 3)
                return (self.fc(x) * self.drop(table)).sum()

        d = tempfile.mkdtemp()
        text = export(Table().train(), (torch.randn(2, 8),), d)
        self.assertIn(" = dropout(", text)
        self.assertEqual(self.dump(d, "eager"), self.dump(d, "recompute"))

    def test_dropout_written_by_hand_from_uniform_values(self):
        # Hugging Face's drop path (Swin, ConvNeXt, BEiT, DINOv2, SegFormer)
        # and a mask drawn as rand() > p: bernoulli(keep), the contract's
        # dropout; noise used any other way stays an error naming it.
        class ByHand(nn.Module):
            def __init__(self, noise):
                super().__init__()
                self.fc = nn.Linear(8, 8)
                self.noise = noise

            def forward(self, x):
                y = self.fc(x)
                if self.noise == "drop_path":
                    keep = 0.75
                    r = torch.floor(torch.rand((y.shape[0], 1), dtype=y.dtype) + keep)
                    return (y.div(keep) * r).sum()
                if self.noise == "mask":
                    return (y * (torch.rand(y.shape) > 0.25).float() / 0.75).sum()
                return (y + torch.rand(y.shape)).sum()

        x = torch.randn(4, 8)
        for noise in ("drop_path", "mask"):
            d = tempfile.mkdtemp()
            text = export(ByHand(noise).train(), (x,), d)
            self.assertIn(" = dropout(", text, noise)
            self.assertNotIn("rand", text, noise)
            self.assertEqual(self.dump(d, "eager"), self.dump(d, "recompute"), noise)
        with self.assertRaises(ExportError) as caught:
            export(ByHand("additive").train(), (x,), tempfile.mkdtemp())
        self.assertIn("(aten.add.Tensor): uniform random values (torch.rand) added to a tensor", str(caught.exception))

    def test_stochastic_depth_is_one_draw_per_sample(self):
        try:
            from torchvision.ops import StochasticDepth
        except ImportError:
            self.skipTest("torchvision is not installed (tools/python_env.sh pins it)")

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 3, padding=1)
                self.drop = StochasticDepth(0.5, "row")

            def forward(self, x):
                return (x + self.drop(self.conv(x))).square().sum()

        torch.manual_seed(7)
        x = torch.randn(8, 4, 5, 5)
        d = tempfile.mkdtemp()
        text = export(Block().train(), (x,), d)
        self.assertIn("f32[8,1,1,1] = dropout(", text)
        self.assertEqual(self.dump(d, "eager"), self.dump(d, "recompute"))
        # One draw per sample: a dropped sample's branch adds nothing, so its
        # gradient is 2x exactly; a kept one's is not.
        out = tempfile.mkdtemp()
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--engine", "eager",
                   "--wrt", "all", "--dump", out)
        gx = np.load(os.path.join(out, "grad_x.npy"))
        dropped = [np.array_equal(gx[i], 2 * x[i].numpy()) for i in range(8)]
        self.assertTrue(any(dropped) and not all(dropped), dropped)

    def test_roll_pad_and_a_table_read_by_constant_indices(self):
        # Swin's attention: a bias table read by a fixed index (rows read
        # more than once, a negative index), shifted windows (roll), window
        # padding (F.pad, and a negative pad that crops).
        class Window(nn.Module):
            def __init__(self):
                super().__init__()
                self.table = nn.Parameter(torch.randn(7, 3))
                self.register_buffer("index", torch.tensor([[0, 3, 3], [6, -1, 2]]))
                self.conv = nn.Conv2d(3, 3, 1)

            def forward(self, x):
                y = torch.roll(self.conv(x), shifts=(2, -1), dims=(2, 3))
                y = F.pad(y, (1, 2, -1, 0), value=0.5)
                bias = self.table[self.index]               # (2, 3, 3), axis 0
                cols = self.table.t()[:, self.index[0]]     # (3, 3), axis 1
                return (y.square().sum() + (bias * y[:2, :, :3, :3].sum(-1)).sum()
                        + (cols * bias[0]).sum())

        torch.manual_seed(9)
        self.check(Window(), torch.randn(2, 3, 5, 4), params_only=True)

    def test_nearest_upsampling_and_indices_on_adjacent_axes(self):
        # GhostNetV2's gate, FPNs' top-down path: F.interpolate(mode=
        # "nearest") runs as x[:, :, h[:, None], w], one gather per axis.
        class Up(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)

            def forward(self, x):
                y = self.conv(x)                                          # (2, 4, 3, 3)
                up = F.interpolate(y, scale_factor=2, mode="nearest")     # (2, 4, 6, 6)
                odd = F.interpolate(y, size=(5, 7), mode="nearest")
                h, w = torch.tensor([2, 0, 0]), torch.tensor([1, 2])
                return up * x[:, :1, :6, :6] + odd.mean() + y[:, :, h[:, None], w].sum(1, keepdim=True)[..., :1, :1]

        torch.manual_seed(17)
        self.check(_loss_of(Up()), torch.randn(2, 3, 6, 6))

        # Index tensors that are not one vector per axis (a diagonal, axes
        # apart) and torch.gather (Funnel's relative shift) by constant
        # indices: single elements, as PyTorch's indexing picks them.
        class Picks(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 1)

            def forward(self, x):
                y = self.conv(x)                                          # (2, 4, 3, 3)
                i = torch.arange(3)
                diagonal = y[:, :, i, i]                                  # (2, 4, 3)
                apart = y[:, torch.tensor([3, 0]), :, torch.tensor([1, 1])]  # (2, 2, 3): axes 1 and 3
                shift = torch.gather(y, 3, torch.tensor([2, 0, 0]).expand(2, 4, 3, 3))
                return diagonal.exp().sum() + (apart * apart).sum() + (shift * y).sum()

        torch.manual_seed(19)
        self.check(_loss_of(Picks()), torch.randn(2, 3, 3, 3), params_only=True)

    def test_softplus_mish_and_leaky_relu(self):
        # Mamba's step sizes (softplus), CSPDarknet's mish (its own
        # decomposition, x * tanh(softplus(x))): inputs from -30 to 30, past
        # the threshold (20) and where exp(x) is below float's epsilon.
        class Soft(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 64)

            def forward(self, x):
                y = self.fc(x) * 10
                return (F.softplus(y) + F.softplus(y, beta=2) * y + F.mish(y) + F.logsigmoid(y)
                        + F.leaky_relu(y, 0.1) * y)

        torch.manual_seed(20)
        net = Soft()
        self.check(_loss_of(net), torch.randn(3, 4), params_only=True)  # a constant 1 is an input too
        x = torch.linspace(-30, 30, 61).reshape(1, 61)
        d = tempfile.mkdtemp()
        class Softplus(nn.Module):
            def forward(self, x):
                return F.softplus(x).sum()

        export(Softplus(), (x,), d)
        out = tempfile.mkdtemp()
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--wrt", "all",
                   "--engine", "eager", "--dump", out)
        xr = x.clone().requires_grad_(True)
        F.softplus(xr).sum().backward()
        want = F.softplus(x.double()).sum().item()
        self.assertLess(abs(float(np.load(os.path.join(out, "loss.npy"))) - want), 4e-6 * want)
        got = np.load(os.path.join(out, "grad_x.npy"))
        # Each element's gradient is sigmoid(x) to float's rounding, as PyTorch's.
        np.testing.assert_allclose(got, xr.grad.numpy(), rtol=2e-7, atol=1e-30)

    def test_activations_and_clamps_exactly_at_their_kink(self):
        # timm's CSP blocks zero their last BatchNorm's weight: every input
        # of the activation after it is exactly the BatchNorm's bias, here
        # on the kink, where PyTorch's gradient is leaky_relu's slope and
        # clamp's 1 (bounds included), and relu6's 0 (the BatchNorm
        # weight's gradient reads it).
        cases = [(lambda z: F.leaky_relu(z, 0.1), 0.0), (lambda z: z.clamp(min=0), 0.0),
                 (lambda z: z.clamp(max=0), 0.0), (lambda z: z.clamp(0, 6), 0.0), (lambda z: z.clamp(0, 6), 6.0),
                 (lambda z: z.clamp(min=1), 1.0), (lambda z: z.clamp(max=-2), -2.0), (F.relu6, 0.0)]
        for i, (act, at) in enumerate(cases):
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 4, 3, padding=1)
                    self.bn = nn.BatchNorm2d(4)
                    nn.init.zeros_(self.bn.weight)
                    nn.init.constant_(self.bn.bias, at)

                def forward(self, x):
                    y = self.conv(x)
                    return act(self.bn(y)) + y  # the loss's cotangent, 2y, varies: the weight's gradient is not 0

            torch.manual_seed(21)
            with self.subTest(case=i):
                self.check(_loss_of(Block()), torch.randn(2, 3, 5, 5), params_only=True)

    def test_unfold_and_fold(self):
        # TNT's pixel embedding: F.unfold's windows as channels.
        class Unfold(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 2, 1)

            def forward(self, x):
                y = self.conv(x)
                a = F.unfold(y, kernel_size=3, padding=1, stride=2)                      # (2, 18, 9)
                b = F.unfold(y, kernel_size=(2, 3), dilation=(2, 1), stride=(1, 2))      # (2, 12, L)
                return a.tanh().sum(-1) + b[:, :, :3].sum((1, 2))[:, None]

        torch.manual_seed(18)
        self.check(_loss_of(Unfold()), torch.randn(2, 3, 6, 5), params_only=True)  # the taps are inputs too

        # F.fold, unfold's adjoint (VOLO's outlook attention): overlapping
        # windows added back, padded, strided and dilated.
        class Fold(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 18, 1)
                self.conv2 = nn.Conv2d(3, 12, 1)

            def forward(self, x):
                a = self.conv(x).flatten(2)  # (2, 18, 9): 3x3 windows of 2 channels
                b = F.fold(a, (5, 6), kernel_size=3, padding=1, stride=2)  # (2, 2, 5, 6)
                c = F.fold(self.conv2(x)[:, :, :2].flatten(2), (4, 8), kernel_size=(2, 3), dilation=(2, 1),
                           stride=(1, 2))  # (2, 2, 4, 8) from 6 blocks
                return b.tanh().sum((2, 3)) + c.square().sum((2, 3))

        torch.manual_seed(22)
        self.check(_loss_of(Fold()), torch.randn(2, 3, 3, 3), params_only=True)

    def test_state_names_with_characters_ids_do_not_hold(self):
        torch.manual_seed(8)
        net = nn.Sequential()
        net.add_module("block1-0", nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
        d = tempfile.mkdtemp()
        text = export(_loss_of(net).train(), (torch.randn(2, 3, 6, 6),), d)
        self.assertIn('name="net.block1_0.1.running_mean"', text)
        self.assertIn("state_net.block1_0.1.running_mean.npy", self.dump(d, "eager"))


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
