"""tools/torch_export_ops_rnn.py: nn.LSTM (one aten.mkldnn_rnn_layer per
layer and direction on PyTorch's CPU build) unrolled into remat's ops,
against PyTorch's autograd: two bidirectional layers batch first with the
zero initial state (Sequencer's), and one layer from an initial h and c
computed by the model; nn.GRU and nn.RNN, which PyTorch itself runs as
element-wise ops, export as those; a packed sequence is refused by name.

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
class RnnTest(unittest.TestCase):

    remat = base.TorchExportTest.remat
    run_remat = base.TorchExportTest.run_remat
    check = base.TorchExportTest.check

    def test_lstm_two_bidirectional_layers_batch_first(self):
        class Tokens(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 5, num_layers=2, batch_first=True, bidirectional=True)
                self.head = nn.Linear(10, 3)

            def forward(self, x):
                y, (h, c) = self.rnn(x)  # y (N, T, 10); h and c (4, N, 5)
                return self.head(y).square().sum() + h.tanh().sum() + c.sum()

        torch.manual_seed(41)
        self.check(Tokens().train(), torch.randn(3, 6, 4), params_only=True)

    def test_lstm_from_an_initial_state_the_model_computes(self):
        class Seeded(nn.Module):
            def __init__(self):
                super().__init__()
                self.h0, self.c0 = nn.Linear(4, 5), nn.Linear(4, 5)
                self.rnn = nn.LSTM(4, 5, bias=False)

            def forward(self, x):  # x (T, N, 4)
                state = (self.h0(x[0])[None], self.c0(x[-1])[None])
                y, _ = self.rnn(x, state)
                return y.sin().sum()

        torch.manual_seed(42)
        self.check(Seeded(), torch.randn(5, 2, 4), params_only=True)

    def test_gru_and_rnn(self):
        class Both(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(4, 5, batch_first=True)
                self.rnn = nn.RNN(5, 3, nonlinearity="tanh")

            def forward(self, x):
                y, _ = self.gru(x)
                z, h = self.rnn(y.transpose(0, 1))
                return z.square().sum() + h.sum()

        torch.manual_seed(43)
        self.check(Both(), torch.randn(2, 4, 4), params_only=True)

    def test_a_packed_sequence_is_refused(self):
        class Packed(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 5)

            def forward(self, x):
                packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([3, 2]))
                y, _ = self.rnn(packed)
                return nn.utils.rnn.pad_packed_sequence(y)[0].sum()

        with self.assertRaises(ExportError) as caught:
            export(Packed(), (torch.randn(3, 2, 4),), tempfile.mkdtemp())
        self.assertIn("<root> (aten._pack_padded_sequence.default): no mapping", str(caught.exception))


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
