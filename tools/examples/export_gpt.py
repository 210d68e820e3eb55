"""Exports nanoGPT's Shakespeare-char GPT (6 layers, 6 heads, 384 wide,
256 tokens; batch 4 here) with every block under torch.utils.checkpoint, as
README's and docs/exporter.md's PyTorch walkthrough runs it:

    .venv/bin/python tools/examples/export_gpt.py gpt     # gpt/program.txt, gpt/*.npy

The model is tools/testdata/nanogpt.py, written as nanoGPT writes it.
"""

import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "testdata"))
from nanogpt import GPT, GPTConfig  # noqa: E402
from torch_export import export  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpt"
    torch.manual_seed(0)
    config = GPTConfig(block_size=256, vocab_size=65, n_layer=6, n_head=6, n_embd=384, dropout=0.0,
                       checkpointed=True)
    model = GPT(config)
    idx = torch.randint(0, config.vocab_size, (4, config.block_size))
    targets = torch.randint(0, config.vocab_size, (4, config.block_size))
    start = time.time()
    export(model, (idx, targets), out)
    print("exported %s (%.1f M parameters) to %s/program.txt in %.1f s"
          % (type(model).__name__, sum(p.numel() for p in model.parameters()) / 1e6, out, time.time() - start))


if __name__ == "__main__":
    main()
