"""tools/model_judge.py: a flip at an element within roundoff of a ReLU
kink is forgiven on either side and nothing else is; a running mean near 0
is judged against the scale of what it averages; tracing the activations
changes no value and no gradient, in place or not."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch_export_test as base  # noqa: E402  (finds PyTorch 2: the workspace's .venv)

if base.HAVE_TORCH:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import model_judge

    class OnAKink(nn.Module):
        """relu(x * w + b) . v, whose first hidden element is exactly 0 in
        float32 and 2^-24 in float64: (1 + 2^-12)^2 rounds to 1 + 2^-11 in
        float32 (ties to even), which b cancels. So PyTorch's float32 takes
        relu's other side there."""

        def __init__(self, inplace):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([1 + 2.0 ** -12, 2.0]))
            self.b = nn.Parameter(torch.tensor([-(1 + 2.0 ** -11), -1.0]))
            self.v = nn.Parameter(torch.tensor([3.0, 5.0]))
            self.inplace = inplace

        def forward(self, x):
            return F.relu(x * self.w + self.b, inplace=self.inplace) @ self.v

    class TwoNear(OnAKink):
        """A second element near the kink, 3 * 2^-24 in float64 and 2^-23
        in float32: within roundoff, but PyTorch's float32 stays on its
        side."""

        def __init__(self):
            super().__init__(False)
            self.w = nn.Parameter(torch.tensor([1 + 2.0 ** -12, 1 + 2.0 ** -12, 2.0]))
            self.b = nn.Parameter(torch.tensor([-(1 + 2.0 ** -11), -(1 + 2.0 ** -11) + 2.0 ** -23, -1.0]))
            self.v = nn.Parameter(torch.tensor([3.0, 7.0, 5.0]))

    X3 = (torch.tensor([1 + 2.0 ** -12, 1 + 2.0 ** -12, 1.0]),)

    def sum_loss(y):
        return y.sum()

    X = (torch.tensor([1 + 2.0 ** -12, 1.0]),)


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch 2 is not installed (tools/python_env.sh)")
class KinkTest(unittest.TestCase):

    def reference(self, inplace=False):
        return model_judge.Reference(OnAKink(inplace), X, sum_loss, ())

    def verdict(self, ref, grads):
        rows, flips = model_judge.judge(ref, ref.value64, grads, {})
        return all(ok for _, _, _, ok in rows), rows, flips

    def test_the_float64_run_is_on_the_other_side(self):
        ref = self.reference()
        self.assertEqual(ref.near, 1)
        self.assertEqual(len(ref._candidates), 1)
        self.assertEqual(ref.torch_flips, 1)
        # float64: relu'(2^-24) = 1, so b's gradient is v; float32: 0.
        self.assertEqual(list(ref.grads64["b"]), [3.0, 5.0])
        self.assertEqual(list(ref.grads32["b"]), [0.0, 5.0])
        # The flip's change: b0's and w0's gradients lose v0's cotangent.
        self.assertEqual(ref.torch_shift["b"][0], -3.0)
        self.assertEqual(ref.torch_shift["v"][0], 0.0)

    def test_either_side_passes_and_pytorch_took_the_flip(self):
        ref = self.reference()
        flip = ref.torch_shift
        flipped = {n: g + flip[n] for n, g in ref.grads64.items()}
        for grads, took in ((ref.grads64, 0), (flipped, 1)):
            ok, rows, (mine, theirs, _) = self.verdict(ref, grads)
            self.assertTrue(ok, rows)
            self.assertEqual((mine, theirs), (took, 1))

    def test_nothing_else_is_forgiven(self):
        ref = self.reference()
        flip = ref.torch_shift
        half = {n: g + 0.5 * flip[n] for n, g in ref.grads64.items()}
        self.assertFalse(self.verdict(ref, half)[0], "half a flip")
        elsewhere = {n: g + flip[n] for n, g in ref.grads64.items()}
        elsewhere["b"] = elsewhere["b"] + np.array([0.0, -3.0])  # the same change, on a smooth element
        self.assertFalse(self.verdict(ref, elsewhere)[0], "a flip's size where no kink is near")
        wrong_v = {n: g.copy() for n, g in ref.grads64.items()}
        wrong_v["v"][1] *= 1 + 1e-3
        self.assertFalse(self.verdict(ref, wrong_v)[0], "a gradient 1e-3 off")

    def test_the_fit_finds_a_flip_pytorch_did_not_take(self):
        # A second element near the kink, 3 * 2^-24 in float64 and 2^-23 in
        # float32: within roundoff, but PyTorch's float32 stays on its side.
        # A run that flips it (and not the first) is found by the fit.
        ref = model_judge.Reference(TwoNear(), X3, sum_loss, ())
        self.assertEqual((ref.near, ref.torch_flips), (2, 1))
        second = [c for c in ref._candidates if c[1] == 1]
        grads = {n: g + ref._change(second)[n] for n, g in ref.grads64.items()}
        self.assertEqual(grads["b"][1], 0.0)
        ok, rows, (mine, theirs, near) = self.verdict(ref, grads)
        self.assertTrue(ok, rows)
        self.assertEqual((mine, theirs, near), (1, 1, 2))
        grads["b"][1] = 1.0  # neither side of the kink
        self.assertFalse(self.verdict(ref, grads)[0])

    def test_the_verdicts_search_finds_a_flip_the_fit_missed(self):
        # The least-squares fit can miss a flip whose change lies in a few
        # elements of a large gradient; Reference.refine, searching by the
        # verdict's own measure, finds it on its own (the fit made to find
        # nothing here), and still forgives nothing else.
        ref = model_judge.Reference(TwoNear(), X3, sum_loss, ())
        ref.nearest = lambda grads, mixed=True: []
        second = [c for c in ref._candidates if c[1] == 1]
        grads = {n: g + ref._change(second)[n] for n, g in ref.grads64.items()}
        ok, rows, (mine, theirs, _) = self.verdict(ref, grads)
        self.assertTrue(ok, rows)
        self.assertEqual((mine, theirs), (1, 1))
        grads["w"] = grads["w"] * np.array([1.0, 1.0, 1.0 + 1e-3])
        self.assertFalse(self.verdict(ref, grads)[0], "a flip and w 1e-3 off")
        half = {n: g + 0.5 * ref._change(second)[n] for n, g in ref.grads64.items()}
        self.assertFalse(self.verdict(ref, half)[0], "half a flip")

    def test_tracing_changes_nothing(self):
        for inplace in (False, True):
            ref = self.reference(inplace)
            m = OnAKink(inplace).double()
            m(X[0].double()).sum().backward()
            for n, p in m.named_parameters():
                self.assertEqual(list(ref.grads64[n]), list(p.grad.numpy()), "%s, inplace=%s" % (n, inplace))
            self.assertEqual(ref.near, 1, "inplace=%s" % inplace)

    def test_every_kinked_activation_is_seen(self):
        # Each module's kinks lie at their own points; an input exactly
        # there in float64 and off it in float32 (the x * w + b above,
        # shifted) is found near a kink by each.
        for act, kink in ((nn.ReLU(), 0.0), (nn.ReLU(inplace=True), 0.0), (nn.ReLU6(), 6.0),
                          (nn.Hardtanh(-2.0, 2.0), 2.0), (nn.Hardswish(), 3.0), (nn.Hardsigmoid(), -3.0),
                          (nn.LeakyReLU(0.1), 0.0)):
            class Shifted(OnAKink):
                def forward(self, x):
                    return act(x * self.w + self.b + kink) @ self.v
            ref = model_judge.Reference(Shifted(False), X, sum_loss, ())
            self.assertGreaterEqual(ref.near, 1, act)
            self.assertEqual(len(ref._candidates), 1, act)


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch 2 is not installed (tools/python_env.sh)")
class RunningMeanTest(unittest.TestCase):

    def test_a_mean_near_zero_is_judged_by_what_it_averages(self):
        torch.manual_seed(3)
        x = torch.randn(64, 4) * 100
        x = x - x.double().mean(0).float()  # each channel's mean about 1e-6 of its values
        bn = nn.BatchNorm1d(4)
        ref = model_judge.Reference(bn, (x,), sum_loss, ())
        mean = ref.state64["running_mean"]
        scale = ref.scale("running_mean")
        self.assertGreater(scale, 1000 * np.max(np.abs(mean)))
        self.assertAlmostEqual(scale, 0.1 * 100, delta=0.1 * 100 * 0.3)  # momentum times the values' rms

        def verdict(running_mean):
            state = dict(ref.state64, running_mean=running_mean)
            rows, _ = model_judge.judge(ref, ref.value64, ref.grads64, state)
            return [ok for name, _, _, ok in rows if name == "running_mean"][0]
        self.assertTrue(verdict(mean + 1e-6 * scale), "roundoff of the values' scale")
        self.assertFalse(verdict(mean + 1e-2 * scale), "1% of the values' scale")


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
