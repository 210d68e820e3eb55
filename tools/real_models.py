"""The models the bench times at the sizes people train them (the bench's
--sweep=models, tools/model_time.py) and plans at sizes past this machine
(tools/examples/predict_peaks.py), each built from its configuration with a
fixed seed, as its library's users write it, in training mode:

  nanogpt     nanoGPT's Shakespeare-char GPT (tools/testdata/nanogpt.py: 6
              layers, 6 heads, 384 wide, 65 characters; 10.7 M parameters),
              every block under torch.utils.checkpoint; batch 4 of 256
  gpt2        Hugging Face's GPT2LMHeadModel with GPT2Config's defaults (GPT-2
              small, 124.4 M parameters, dropout 0.1), activation_checkpointing_
              enable(); batch 1 of 1024 tokens
  llama-100m  Hugging Face's LlamaForCausalLM, 12 layers, 768 wide, 12 query
              and 4 key/value heads, SiLU MLP 2048 wide, 32,000 tokens, tied
              embeddings (100.1 M parameters), activation_checkpointing_enable();
              batch 1 of 1024 tokens
  llama-1b    LlamaForCausalLM shaped as Llama 3.2 1B (16 layers, 2048 wide,
              32 query and 8 key/value heads, MLP 8192, 128,256 tokens, tied;
              1.24 B parameters); for plans only at its size
  resnet50    torchvision's resnet50 (25.6 M parameters), every Bottleneck
              wrapped by torch.distributed's apply_activation_checkpointing
              (as FSDP users checkpoint a CNN), cross-entropy on 1000
              classes; batch 16 at 224x224

`build(name, batch=None, tokens=None, checkpointed=True)` returns a Model:
the module, its example inputs (forward's keyword arguments or a tuple), and
how torch_export.export takes its loss. With checkpointed=False the same
module (the same weights: the seed is fixed) runs without checkpointing, as
PyTorch's eager baseline. Build on the meta device (`with
torch.device("meta")`) for a shapes-only export; the inputs are then still
real (token ids, labels), and images are meta too.
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "testdata"))

# name -> (default batch, default tokens or image side)
SIZES = {
    "nanogpt": (4, 256),
    "gpt2": (1, 1024),
    "llama-100m": (1, 1024),
    "llama-1b": (1, 2048),
    "resnet50": (16, 224),
}
SEED = 0


class Model:
    """module; inputs (a dict of forward's keyword arguments, or a tuple);
    loss and loss_inputs as torch_export.export takes them (None and () when
    the module returns its loss); step(): the loss of one forward on the
    inputs, for backward()."""

    def __init__(self, module, inputs, loss=None, loss_inputs=()):
        self.module, self.inputs, self.loss, self.loss_inputs = module, inputs, loss, tuple(loss_inputs)

    def step(self):
        out = self.module(**self.inputs) if isinstance(self.inputs, dict) else self.module(*self.inputs)
        if self.loss is not None:
            return self.loss(out, *self.loss_inputs)
        if isinstance(out, tuple):  # nanoGPT: (logits, loss)
            return out[1]
        return out.loss

    def parameters(self):
        return sum(p.numel() for p in self.module.parameters())


def names():
    return sorted(SIZES)


def size(name, batch=None, tokens=None):
    """(batch, tokens) of model `name`: those given, its defaults for None."""
    if name not in SIZES:
        raise ValueError("no model %r; models: %s" % (name, ", ".join(names())))
    default_batch, default_tokens = SIZES[name]
    return (default_batch if batch is None else batch, default_tokens if tokens is None else tokens)


def build(name, batch=None, tokens=None, checkpointed=True):
    """The Model `name` (see the module's docstring) at batch x tokens (or
    image side), its defaults when None, on the current default device."""
    batch, tokens = size(name, batch, tokens)
    if batch < 1 or tokens < 1:
        raise ValueError("%s: batch and tokens must be positive (got %d and %d)" % (name, batch, tokens))
    torch.manual_seed(SEED)
    if name == "resnet50":
        return _resnet50(batch, tokens, checkpointed)
    if name == "nanogpt":
        from nanogpt import GPT, GPTConfig
        config = GPTConfig(block_size=tokens, vocab_size=65, n_layer=6, n_head=6, n_embd=384, dropout=0.0,
                           checkpointed=checkpointed)
        module = GPT(config).train()
        ids = _ids(config.vocab_size, batch, tokens)
        return Model(module, (ids, ids))
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    if name == "gpt2":
        config = GPT2Config(n_positions=max(tokens, 1024))
        module = GPT2LMHeadModel(config)
    else:
        shape = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                     num_attention_heads=12, num_key_value_heads=4) if name == "llama-100m" else dict(
            vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
            num_attention_heads=32, num_key_value_heads=8)
        config = LlamaConfig(max_position_embeddings=max(tokens, 2048), tie_word_embeddings=True, **shape)
        module = LlamaForCausalLM(config)
    if checkpointed:  # transformers 5's name; gradient_checkpointing_enable is its deprecated alias
        module.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    module.train()
    ids = _ids(config.vocab_size, batch, tokens)
    return Model(module, {"input_ids": ids, "labels": ids})


def _ids(vocab, batch, tokens):
    """Token ids: real CPU tensors even under torch.device("meta") (the
    shapes-only export reads them)."""
    return torch.randint(0, vocab, (batch, tokens), device="cpu", generator=torch.Generator().manual_seed(SEED))


def _resnet50(batch, side, checkpointed):
    import torchvision
    from torchvision.models.resnet import Bottleneck
    module = torchvision.models.resnet50()
    if checkpointed:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
        apply_activation_checkpointing(module, check_fn=lambda m: isinstance(m, Bottleneck))
    module.train()
    g = torch.Generator().manual_seed(SEED)
    images = torch.randn(batch, 3, side, side, generator=g, device="cpu")
    if torch.empty(0).is_meta:
        images = images.to("meta")
    labels = torch.randint(0, 1000, (batch,), generator=g, device="cpu")
    return Model(module, (images,), loss=F.cross_entropy, loss_inputs=(labels,))
