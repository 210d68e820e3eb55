"""tools/torch_export_ops_extrema.py: torch.maximum and torch.minimum (a
constant operand, broadcasting, ties between two values of the model whose
gradient PyTorch splits in half), amin and the whole max and min, and
torch.max(x, dim)'s values, each against PyTorch's autograd; a row with
ties under max(x, dim), and a model that reads max's indices, are refused
by name.

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
    import torch
    import torch.nn as nn
    from torch_export import ExportError, export


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch 2 is not installed: tools/torch_export.py is not tested")
class ExtremaTest(unittest.TestCase):

    remat = base.TorchExportTest.remat
    run_remat = base.TorchExportTest.run_remat
    check = base.TorchExportTest.check

    def test_maximum_and_minimum(self):
        class Pairs(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(4, 6), nn.Linear(4, 6)
                self.c = nn.Linear(4, 6)
                self.c.load_state_dict(self.a.state_dict())  # c(x) == a(x), bit for bit: ties everywhere
                self.row = nn.Parameter(torch.randn(6))

            def forward(self, x):
                a, b = self.a(x), self.b(x)
                guard = torch.maximum(a, torch.full((), torch.finfo(a.dtype).min))  # XGLM's
                tied = torch.maximum(a, self.c(x))  # PyTorch gives a and c half the gradient each
                low = torch.minimum(b, self.row)  # a (6,) row broadcast over (N, 6)
                return ((guard * b).sum(-1) + tied.square().sum(-1) + torch.max(low, a.tanh()).sum(-1) \
                    + torch.minimum(a[:, :1], b).sum(-1)).sum()

        torch.manual_seed(31)
        self.check(Pairs(), torch.randn(5, 4), params_only=True)

    def test_amin_whole_max_and_min_and_max_over_an_axis(self):
        class Reduce(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 6)

            def forward(self, x):
                y = self.lin(x)
                values, _ = y.max(1)
                low = torch.min(y.tanh(), dim=0, keepdim=True).values
                return values.square().sum() + low.sum() + y.amin(1).sum() + y.max() * y.min() \
                    + y.relu().amax((0, 1))

        torch.manual_seed(32)
        self.check(Reduce(), torch.randn(5, 4), params_only=True)

    def test_max_over_an_axis_with_ties_or_its_indices_read_is_refused(self):
        class Tied(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 3)

            def forward(self, x):
                y = self.lin(x)
                return torch.cat([y, y], 1).max(1).values.sum()  # each row's maximum twice

        with self.assertRaises(ExportError) as caught:
            export(Tied(), (torch.randn(2, 4),), tempfile.mkdtemp())
        self.assertIn("<root> (aten.max.dim): max(dim=1) where a row's maximum is held by several elements",
                      str(caught.exception))

        class Indices(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 3)

            def forward(self, x):
                y = self.lin(x)
                return (y.min(-1).indices.float() * y.sum(-1)).sum()

        with self.assertRaises(ExportError) as caught:
            export(Indices(), (torch.randn(2, 4),), tempfile.mkdtemp())
        self.assertIn("<root> (aten.min.dim): its output 1 is not mapped", str(caught.exception))


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
