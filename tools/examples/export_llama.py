"""Exports a Hugging Face Llama built from its config (never downloaded),
in training mode with Hugging Face's own checkpointing switch on, as
README's "Start here: a PyTorch user" runs it:

    .venv/bin/python tools/examples/export_llama.py llama   # llama/program.txt, llama/*.npy

The model is transformers' LlamaForCausalLM as its users write it:
AutoModelForCausalLM.from_config, gradient_checkpointing_enable(), the loss
from `labels=`. The size is a small Llama (4 layers, 256 wide, 8 query and
4 key/value heads, SiLU MLP 688 wide, RoPE, RMSNorm; batch 2 of 128 tokens)
that exports and runs in seconds; --layers, --width and --tokens change it.
"""

import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from torch_export import export  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="llama", help="the directory to write")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256, help="hidden size (heads of 32)")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    heads = max(args.width // 32, 2)
    config = LlamaConfig(vocab_size=2048, hidden_size=args.width, intermediate_size=args.width * 43 // 16,
                         num_hidden_layers=args.layers, num_attention_heads=heads, num_key_value_heads=heads // 2,
                         max_position_embeddings=max(args.tokens, 256))
    model = AutoModelForCausalLM.from_config(config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ids = torch.randint(0, config.vocab_size, (args.batch, args.tokens))
    start = time.time()
    export(model, {"input_ids": ids, "labels": ids}, args.out)
    print("exported %s (%.1f M parameters) to %s/program.txt in %.1f s"
          % (type(model).__name__, sum(p.numel() for p in model.parameters()) / 1e6, args.out,
             time.time() - start))


if __name__ == "__main__":
    main()
