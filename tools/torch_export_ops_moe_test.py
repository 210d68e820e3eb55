"""export's fixed_decisions and tools/torch_export_ops_moe.py: a mixture of
experts written as Hugging Face writes its two experts implementations
(transformers.integrations.moe), routed by topk, each against PyTorch's
autograd with the routing fixed at export: the experts' loop over
one_hot, where, indexing and index_add; the grouped one over sort, histc,
cumsum and torch._grouped_mm. Without fixed_decisions the export is an
error that names the routing and says how to fix it. With it, max(x, dim)
gives the gradient to the element its index names, ties included, and
sort's values theirs.

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
    import torch.nn.functional as F
    from torch_export import ExportError, export

    class Moe(nn.Module):
        """4 experts, 2 per token, over (tokens, 8) rows (rows of 16 bytes, as
        torch._grouped_mm needs); `grouped`: the
        experts as torch._grouped_mm over tokens sorted by expert."""

        def __init__(self, grouped):
            super().__init__()
            self.grouped = grouped
            self.router = nn.Linear(8, 4, bias=False)
            self.up = nn.Parameter(torch.randn(4, 12, 8) * 0.3)    # (experts, out, in)
            self.down = nn.Parameter(torch.randn(4, 8, 12) * 0.3)

        def forward(self, x):
            probs = F.softmax(self.router(x), dim=-1)
            weights, experts = torch.topk(probs, 2, dim=-1)
            weights = weights / weights.sum(-1, keepdim=True)
            y = self.by_groups(x, weights, experts) if self.grouped else self.by_loop(x, weights, experts)
            return (y * x).sum()

        def by_loop(self, x, weights, experts):
            out = torch.zeros_like(x)
            with torch.no_grad():
                mask = F.one_hot(experts, num_classes=4).permute(2, 1, 0)
                hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
            for e in hit:
                e = e[0]
                slot, token = torch.where(mask[e])
                h = F.silu(F.linear(x[token], self.up[e]))
                h = F.linear(h, self.down[e]) * weights[token, slot, None]
                out.index_add_(0, token, h)
            return out

        def by_groups(self, x, weights, experts):
            flat = experts.reshape(-1)
            ids, perm = torch.sort(flat)
            rows = x[perm // 2]
            counts = torch.histc(ids.float(), bins=4, min=0, max=3)
            offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
            h = F.silu(torch._grouped_mm(rows, self.up.transpose(-2, -1), offs=offsets))
            h = torch._grouped_mm(h, self.down.transpose(-2, -1), offs=offsets) * weights.reshape(-1)[perm, None]
            inverse = torch.empty_like(perm)
            inverse[perm] = torch.arange(perm.numel())
            return h[inverse].view(x.shape[0], 2, -1).sum(1)


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch 2 is not installed: tools/torch_export.py is not tested")
class MoeTest(unittest.TestCase):

    remat = base.TorchExportTest.remat
    run_remat = base.TorchExportTest.run_remat
    check = base.TorchExportTest.check

    def test_experts_loop_and_grouped_matmul_with_the_routing_fixed(self):
        for grouped in (False, True):
            torch.manual_seed(51)
            with self.subTest(grouped=grouped):
                self.check(Moe(grouped), torch.randn(10, 8), params_only=True, fixed_decisions=True)

    def test_routing_without_fixed_decisions_is_an_error_that_says_how(self):
        with self.assertRaises(ExportError) as caught:
            export(Moe(False), (torch.randn(10, 8),), tempfile.mkdtemp())
        text = str(caught.exception)
        self.assertIn("<root> (aten.topk.default): topk's indices computed from the model's values", text)
        self.assertIn("the first at <root> (aten.topk): export(..., fixed_decisions=True)", text)

    def test_max_over_an_axis_with_ties_and_sort_with_fixed_indices(self):
        class Ties(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 3)

            def forward(self, x):
                y = self.lin(x)
                top = torch.cat([y, y], 1).max(1).values  # PyTorch: the gradient to the first of the two
                ordered, _ = torch.sort(y.tanh(), dim=0, descending=True)
                return (top.square() + (ordered * torch.arange(1.0, 4.0)).sum(0).sum()).sum()

        torch.manual_seed(52)
        self.check(Ties(), torch.randn(5, 4), params_only=True, fixed_decisions=True)


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
