"""tools/torch_export.py on the models people train, as their libraries write them.

Hugging Face transformers (GPT-2, Llama, BERT masked LM, Qwen2), torchvision
(ResNet-18, ResNet-50, MobileNetV2, ViT) and timm (ViT, ConvNeXt), each built
from a small random-init config (never downloaded), in training mode, with
the library's checkpointing switch on (gradient_checkpointing_enable,
set_grad_checkpointing; torchvision has none):

- the export has one region per checkpoint call the model makes (the number
  of layers or blocks its config gives);
- dropout off: remat's loss, every gradient and every new BatchNorm
  statistic (recompute engine) judged by tools/model_judge.py against a
  float64 run of the same model: remat's error relative to float64 is at
  most 20 times PyTorch's own float32 error, or 20 * 64 * 2^-24 where
  PyTorch's is smaller, each run against the float64 gradient nearest it
  among those that ReLU-family kinks within roundoff allow (ResNet-50 here:
  4690 elements near a kink, PyTorch's float32 on the other side of 14,
  remat's of 15; both then 2e-3 from float64);
- the judgement has teeth on each model: one element of the largest
  gradient moved by twice what its tensor allows fails;
- remat's eager and recompute engines give the same bits, with dropout on
  where the model has it (the contract's mask, one key per site).

Needs PyTorch 2, torchvision, transformers==5.23.0 and timm==1.0.31 from the
workspace's environment (tools/python_env.sh); a family whose library is
missing is skipped with the reason.
"""

import os
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch_export_test as base  # noqa: E402  (its helpers; a module, so its tests do not run here)

if base.HAVE_TORCH:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import model_judge
    from torch_export import export
    from torch_export_program import _ident


def _library(name):
    try:
        return __import__(name)
    except ImportError:
        return None


# (family, library, builder(dropout) -> (model, inputs dict or tuple, loss fn or None, loss inputs, calls)).
def _hf(kind):
    def build(dropout):
        import transformers as T
        p = 0.1 if dropout else 0.0
        common = dict(vocab_size=64, max_position_embeddings=32)
        if kind == "gpt2":
            m = T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=32, vocab_size=64,
                                               resid_pdrop=p, embd_pdrop=p, attn_pdrop=p))
        elif kind == "llama":
            m = T.LlamaForCausalLM(T.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                 num_attention_heads=4, num_key_value_heads=2, attention_dropout=p,
                                                 **common))
        elif kind == "qwen2":
            m = T.Qwen2ForCausalLM(T.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                 num_attention_heads=4, num_key_value_heads=2, attention_dropout=p,
                                                 **common))
        else:
            m = T.BertForMaskedLM(T.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                               intermediate_size=64, hidden_dropout_prob=p,
                                               attention_probs_dropout_prob=p, **common))
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        ids = torch.randint(0, 64, (2, 8))
        labels = ids.clone()
        if kind == "bert":
            labels[:, ::2] = -100  # masked LM: the loss over the masked positions only
        return m, {"input_ids": ids, "labels": labels}, None, (), 2
    return build


# The torchvision ResNets' and MobileNetV2's image side and batch, where
# None keeps the test's (64, and 2 or 8): tools/examples/model_table.py's
# --image-size and --batch set them to time training sizes. The ViTs' image
# side is in their configs and stays.
CONVNET_SIZE = {"image": None, "batch": None}


def _vision(kind, image=None, batch=None):
    """A torchvision or timm family; `image` and `batch` fix a convnet's
    size (else CONVNET_SIZE's, else the test's)."""
    def build(dropout):
        p = 0.1 if dropout else 0.0
        calls = 0
        if kind.startswith("torchvision"):
            import torchvision.models as tv
            name = kind.split(".")[1]
            if name == "vit":
                m = tv.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                         mlp_dim=64, num_classes=10, dropout=p, attention_dropout=p)
            elif name == "mobilenet_v2":
                m = tv.mobilenet_v2(num_classes=10, width_mult=0.25, dropout=p if dropout else 0.2)
                if not dropout:
                    m.classifier[0].p = 0.0
            else:
                m = getattr(tv, name)(num_classes=10)
        else:
            import timm.models as tm
            if kind == "timm.vit":
                m = tm.vision_transformer.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2,
                                                            num_heads=2, num_classes=10, proj_drop_rate=p,
                                                            attn_drop_rate=p)
                calls = 2
            else:
                m = tm.convnext.ConvNeXt(depths=(1, 1, 2, 1), dims=(8, 16, 32, 64), num_classes=10, drop_rate=p)
                calls = 5
            m.set_grad_checkpointing(True)
        convnet = "resnet" in kind or "mobilenet" in kind
        size = (image or CONVNET_SIZE["image"] or 64) if convnet else 32
        # ResNet-50's BatchNorms at a batch of 2 make its float32 gradients
        # too ill-conditioned to compare (tens of percent from float64): 8.
        n = batch or (CONVNET_SIZE["batch"] if convnet and CONVNET_SIZE["batch"] else 8 if "resnet50" in kind else 2)
        targets = torch.tensor(([3, 7, 1, 0, 9, 2, 5, 4] * (n // 8 + 1))[:n])
        return m, (torch.randn(n, 3, size, size),), F.cross_entropy, (targets,), calls
    return build


FAMILIES = [
    ("gpt2", "transformers", _hf("gpt2")),
    ("llama", "transformers", _hf("llama")),
    ("bert", "transformers", _hf("bert")),
    ("qwen2", "transformers", _hf("qwen2")),
    ("torchvision.resnet18", "torchvision", _vision("torchvision.resnet18")),
    # At batch 4 and 112x112 one ReLU input of these seeds sits within
    # roundoff of 0: remat on AVX-512 and PyTorch on AVX2 each land on its
    # other side (model_judge.py's kinks).
    ("torchvision.resnet18@112", "torchvision", _vision("torchvision.resnet18", image=112, batch=4)),
    ("torchvision.resnet50", "torchvision", _vision("torchvision.resnet50")),
    ("torchvision.mobilenet_v2", "torchvision", _vision("torchvision.mobilenet_v2")),
    ("torchvision.vit", "torchvision", _vision("torchvision.vit")),
    ("timm.vit", "timm", _vision("timm.vit")),
    ("timm.convnext", "timm", _vision("timm.convnext")),
]


# The models of these libraries that the issue did not name, run the same
# way (REMAT_FULL=1, tools/ci_full.sh: a few minutes more). Their checkpoint
# calls are not known here: the exporter counts them itself and refuses a
# program with fewer regions, so `calls` is None and the count is not
# compared again. Two of them waited on findings, now explained (issue 62):
# torchvision's regnet_y_400mf (a BatchNorm weight's gradient 3.7e-2 from
# float64: ReLU kinks, remat's float32 on the other side of 4 elements
# within roundoff of 0) and timm's efficientnet_b0 (a running mean near 0 in
# float64: judged against the scale of what it averages, model_judge.py).
def _hf_more(cls_name, config_name, export_options=None, **config):
    """A Hugging Face language model from its config; export_options go to
    export (fixed_decisions for a mixture of experts' routing)."""
    def build(dropout):
        import transformers as T
        cfg = getattr(T, config_name)(**config)
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob", "attention_dropout", "dropout",
                      "resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout", "attention_probs_dropout"):
            if hasattr(cfg, field) and isinstance(getattr(cfg, field), float):
                setattr(cfg, field, 0.1 if dropout else 0.0)
        m = getattr(T, cls_name)(cfg)
        if m.supports_gradient_checkpointing:  # Funnel has no switch
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        ids = torch.randint(0, 64, (2, 8))
        return m, {"input_ids": ids, "labels": ids.clone()}, None, (), None, export_options or {}
    return build


def _whisper(dropout):
    import transformers as T
    p = 0.1 if dropout else 0.0
    cfg = T.WhisperConfig(vocab_size=64, num_mel_bins=8, encoder_layers=2, decoder_layers=2,
                          encoder_attention_heads=4, decoder_attention_heads=4, d_model=32, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, max_source_positions=8, max_target_positions=16, pad_token_id=0,
                          decoder_start_token_id=1, dropout=p, attention_dropout=p, activation_dropout=p)
    m = T.WhisperForConditionalGeneration(cfg)
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    # 8 mel bins, 16 frames (twice max_source_positions, as Whisper's conv stride 2 needs).
    return m, {"input_features": torch.randn(2, 8, 16), "labels": torch.randint(2, 64, (2, 6))}, None, (), None


def _hf_vision(cls_name, config_name, size, batch=2, **config):
    """A Hugging Face image classifier from its config, its drop path (Hugging
    Face's own, floor(keep + rand)) at 0.1 with dropout on; `batch` images
    (even)."""
    def build(dropout):
        import transformers as T
        cfg = getattr(T, config_name)(**config)
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob", "drop_path_rate",
                      "classifier_dropout_prob"):
            if isinstance(getattr(cfg, field, None), float):  # LeViT's drop_path_rate is an int 0: none
                setattr(cfg, field, 0.1 if dropout else 0.0)
        m = getattr(T, cls_name)(cfg)
        if m.supports_gradient_checkpointing:
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return (m, {"pixel_values": torch.randn(batch, 3, size, size), "labels": torch.tensor([1, 0] * (batch // 2))},
                None, (), None)
    return build


def _vision_more(make, size=64, batch=2):
    """A torchvision or timm classifier, `batch` images (even) of size x size."""
    def build(dropout):
        m = make()
        if not dropout:
            for mod in m.modules():
                if type(mod).__name__ in ("Dropout", "StochasticDepth"):
                    mod.p = 0.0
                elif type(mod).__name__ == "DropPath":
                    mod.drop_prob = 0.0
        if hasattr(m, "set_grad_checkpointing"):
            try:
                m.set_grad_checkpointing(True)
            except AssertionError:  # timm's models without it (SE-ResNet, DLA, CSPNet) say so
                pass
        return m, (torch.randn(batch, 3, size, size),), F.cross_entropy, (torch.tensor([3, 7] * (batch // 2)),), None
    return build


def _tv(name, **kw):
    return lambda: getattr(__import__("torchvision.models", fromlist=["x"]), name)(num_classes=10, **kw)


def _timm(name, **kw):
    return lambda: __import__("timm").create_model(name, num_classes=10, **kw)


_DECODER = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=32)
MORE_FAMILIES = [
    ("mistral", "transformers", _hf_more("MistralForCausalLM", "MistralConfig", num_key_value_heads=2, **_DECODER)),
    ("phi3", "transformers", _hf_more("Phi3ForCausalLM", "Phi3Config", num_key_value_heads=2, pad_token_id=0,
                                      **_DECODER)),
    ("gemma", "transformers", _hf_more("GemmaForCausalLM", "GemmaConfig", num_key_value_heads=2, head_dim=8,
                                       **_DECODER)),
    ("gpt_neox", "transformers", _hf_more("GPTNeoXForCausalLM", "GPTNeoXConfig", **_DECODER)),
    ("opt", "transformers", _hf_more("OPTForCausalLM", "OPTConfig", vocab_size=64, hidden_size=32, ffn_dim=64,
                                     num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32,
                                     word_embed_proj_dim=32)),
    ("roberta", "transformers", _hf_more("RobertaForMaskedLM", "RobertaConfig", vocab_size=64, hidden_size=32,
                                         intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         max_position_embeddings=40)),
    ("distilbert", "transformers", _hf_more("DistilBertForMaskedLM", "DistilBertConfig", vocab_size=64, dim=32,
                                            hidden_dim=64, n_layers=2, n_heads=4, max_position_embeddings=32)),
    ("torchvision.efficientnet_b0", "torchvision", _vision_more(_tv("efficientnet_b0"))),
    ("torchvision.mobilenet_v3_small", "torchvision", _vision_more(_tv("mobilenet_v3_small"))),
    ("torchvision.shufflenet_v2", "torchvision", _vision_more(_tv("shufflenet_v2_x0_5"))),
    ("torchvision.squeezenet", "torchvision", _vision_more(_tv("squeezenet1_1"))),
    ("torchvision.swin_t", "torchvision", _vision_more(_tv("swin_t"))),
    ("torchvision.regnet_y_400mf", "torchvision", _vision_more(_tv("regnet_y_400mf"))),
    ("timm.resnet18", "timm", _vision_more(_timm("resnet18"))),
    ("timm.efficientnet_b0", "timm", _vision_more(_timm("efficientnet_b0"))),
    ("timm.deit_tiny", "timm", _vision_more(_timm("deit_tiny_patch16_224", img_size=32, patch_size=8), 32)),
    ("timm.swin", "timm", _vision_more(_timm("swin_tiny_patch4_window7_224", img_size=56), 56)),
    # Refused by name until their ops mapped (issue 62): GroupNorm and
    # PoolFormer's padded pooling, LeViT's BatchNorm1d, NFNet's standardized
    # weights and ceil_mode pooling, XCiT's F.normalize and repeat, Swin V2's
    # cosine attention and zeroed key bias, BLOOM's baddbmm, VGG's 7x7 head
    # on a 2x2 map.
    ("torchvision.vgg11_bn", "torchvision", _vision_more(_tv("vgg11_bn"))),
    ("torchvision.swin_v2_t", "torchvision", _vision_more(_tv("swin_v2_t"))),
    ("timm.poolformer_s12", "timm", _vision_more(_timm("poolformer_s12"))),
    ("timm.levit_128s", "timm", _vision_more(_timm("levit_128s", img_size=64), 64)),
    ("timm.nfnet_f0", "timm", _vision_more(_timm("dm_nfnet_f0"))),
    ("timm.xcit_nano", "timm", _vision_more(_timm("xcit_nano_12_p8_224", img_size=32, depth=2), 32)),
    ("bloom", "transformers", _hf_more("BloomForCausalLM", "BloomConfig", vocab_size=64, hidden_size=32, n_layer=2,
                                       n_head=4)),
    # Encoder-decoders, an audio model and newer vision models: T5's first
    # block returns two values (a region packed), Whisper's conv1d front end.
    ("t5", "transformers", _hf_more("T5ForConditionalGeneration", "T5Config", vocab_size=64, d_model=32, d_kv=8,
                                    d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0)),
    ("bart", "transformers", _hf_more("BartForConditionalGeneration", "BartConfig", vocab_size=64, d_model=32,
                                      encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                      decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                      max_position_embeddings=32)),
    ("whisper", "transformers", _whisper),
    ("qwen3", "transformers", _hf_more("Qwen3ForCausalLM", "Qwen3Config", num_key_value_heads=2, head_dim=8,
                                       **_DECODER)),
    ("torchvision.googlenet", "torchvision", _vision_more(_tv("googlenet", aux_logits=False, init_weights=True))),
    ("timm.convnextv2", "timm", _vision_more(_timm("convnextv2_atto"))),
    ("timm.mobilenetv4", "timm", _vision_more(_timm("mobilenetv4_conv_small"))),
    ("timm.maxvit", "timm", _vision_more(_timm("maxvit_nano_rw_256", img_size=64), 64)),
    # Tried as a user would after the issue's families (issue 62's later
    # round): Mamba's softplus and scan loop, Funnel's gather and dropout of
    # a constant, TNT's unfold, ResNeSt's and SKNet's softmax over branches,
    # Hugging Face's drop path (floor(keep + rand)) in its vision models.
    ("mamba", "transformers", _hf_more("MambaForCausalLM", "MambaConfig", vocab_size=64, hidden_size=32,
                                       num_hidden_layers=2, state_size=4)),
    ("funnel", "transformers", _hf_more("FunnelForMaskedLM", "FunnelConfig", vocab_size=64, d_model=32, n_head=4,
                                        d_head=8, d_inner=64, block_sizes=[1, 1], num_decoder_layers=1)),
    ("gptj", "transformers", _hf_more("GPTJForCausalLM", "GPTJConfig", vocab_size=64, n_embd=32, n_layer=2, n_head=4,
                                      n_positions=32, rotary_dim=4)),
    ("falcon", "transformers", _hf_more("FalconForCausalLM", "FalconConfig", vocab_size=64, hidden_size=32,
                                        num_hidden_layers=2, num_attention_heads=4)),
    ("gemma3", "transformers", _hf_more("Gemma3ForCausalLM", "Gemma3TextConfig", num_key_value_heads=2, head_dim=8,
                                        **_DECODER)),
    ("olmo2", "transformers", _hf_more("Olmo2ForCausalLM", "Olmo2Config", **_DECODER)),
    ("deberta_v2", "transformers", _hf_more("DebertaV2ForMaskedLM", "DebertaV2Config", vocab_size=64, hidden_size=32,
                                            num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                            max_position_embeddings=32)),
    ("hf.swin", "transformers", _hf_vision("SwinForImageClassification", "SwinConfig", 32, image_size=32,
                                           patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                                           window_size=4, num_labels=3)),
    ("hf.convnext", "transformers", _hf_vision("ConvNextForImageClassification", "ConvNextConfig", 64,
                                               hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 2, 1], num_labels=3)),
    ("hf.dinov2", "transformers", _hf_vision("Dinov2ForImageClassification", "Dinov2Config", 32, image_size=32,
                                             patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                             num_labels=3)),
    ("timm.tnt", "timm", _vision_more(_timm("tnt_s_patch16_224", img_size=64))),
    ("timm.resnest14d", "timm", _vision_more(_timm("resnest14d"))),
    ("timm.sknet", "timm", _vision_more(_timm("skresnet18"))),
    ("torchvision.resnext50", "torchvision", _vision_more(_tv("resnext50_32x4d"))),
]
FULL = os.environ.get("REMAT_FULL") == "1"


def export_family(build, dropout):
    """Builds a family's model (seed 20, training mode) and exports it to a
    new directory: (model, inputs, loss, loss_inputs, calls, directory,
    program text, export seconds)."""
    torch.manual_seed(20)
    built = build(dropout)  # and export's options, where a family has any
    model, inputs, loss, loss_inputs, calls = built[:5]
    model.train()
    d = tempfile.mkdtemp()
    start = time.time()
    text = export(model, inputs, d, loss=loss, loss_inputs=loss_inputs, **(built[5] if len(built) > 5 else {}))
    return model, inputs, loss, loss_inputs, calls, d, text, time.time() - start


def dumped(dumps, kind, name):
    """`kind` ("grad", "state") of the module path `name` from remat's --dump
    files: the program names inputs by their module paths, with any
    character its grammar does not take as "_" (RegNet's `block1-0`); an
    nn.Linear weight is exported transposed (NAME.T)."""
    key = "%s_%s" % (kind, _ident(name))
    if key + ".npy" in dumps:
        return dumps[key + ".npy"]
    return dumps[key + ".T.npy"].T


def judged(ref, dumps):
    """model_judge.judge on remat's --dump files of one run."""
    return model_judge.judge(ref, float(dumps["loss.npy"]),
                             {n: dumped(dumps, "grad", n) for n in ref.grads64},
                             {n: dumped(dumps, "state", n) for n in ref.state64})


@unittest.skipIf(not base.HAVE_TORCH, "PyTorch is not installed: the exporter's models are not tested")
class ModelsTest(unittest.TestCase):

    remat = base.TorchExportTest.remat

    def dump(self, d, engine):
        out = tempfile.mkdtemp()
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--engine", engine,
                   "--dump", out)
        return {f: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}

    def check_family(self, family, library, build):
        if _library(library) is None:
            self.skipTest("%s is not installed (tools/python_env.sh pins it)" % library)
        model, inputs, loss, loss_inputs, calls, d, text, seconds = export_family(build, False)
        print("%s: exported in %.1f s, %d regions" % (family, seconds, text.count(" = checkpoint(")))
        if calls is not None:
            self.assertEqual(text.count(" = checkpoint("), calls, "regions found vs checkpoint calls made")
        eager, recompute = self.dump(d, "eager"), self.dump(d, "recompute")
        for f, a in eager.items():
            self.assertEqual(a.tobytes(), recompute[f].tobytes(), "%s: eager and recompute differ" % f)
        ref = model_judge.Reference(model, inputs, loss, loss_inputs)
        rows, (mine, theirs, near) = judged(ref, recompute)
        print("%s: %d elements within roundoff of a kink; flips taken: remat %d, PyTorch float32 %d"
              % (family, near, mine, theirs))
        for name, remat_err, torch_err, ok in rows:
            self.assertTrue(ok, "%s: remat %.3g from float64, PyTorch float32 %.3g (at most %d times that or %.3g)"
                            % (name, remat_err, torch_err, model_judge.RATIO, model_judge.RATIO * model_judge.FLOOR))
        # The judgement has teeth here: remat's own run with one element of
        # its largest gradient moved by twice what that tensor allows fails
        # (no flip at a kink moves one element alone).
        name = max(ref.grads64, key=lambda n: ref.grads64[n].size)
        allowed = model_judge.RATIO * max([r[2] for r in rows if r[0] == name][0], model_judge.FLOOR)
        grads = {n: dumped(recompute, "grad", n) for n in ref.grads64}
        moved = grads[name].copy()
        moved.reshape(-1)[int(np.argmax(np.abs(ref.grads64[name])))] += 2 * allowed * ref.scale(name)
        grads[name] = moved
        rows, _ = model_judge.judge(ref, float(recompute["loss.npy"]), grads,
                                    {n: dumped(recompute, "state", n) for n in ref.state64})
        self.assertFalse(all(ok for _, _, _, ok in rows), "%s moved by %.3g of its scale passed" % (name, 2 * allowed))
        # Dropout on: one mask, the contract's, in every engine.
        model, inputs, loss, loss_inputs, calls, d, text, _ = export_family(build, True)
        if " = dropout(" in text:
            eager, recompute = self.dump(d, "eager"), self.dump(d, "recompute")
            for f, a in eager.items():
                self.assertEqual(a.tobytes(), recompute[f].tobytes(), "%s with dropout: eager and recompute" % f)


def _test(family, library, build):
    def test(self):
        self.check_family(family, library, build)
    return test


for _family, _lib, _build in FAMILIES:
    setattr(ModelsTest, "test_" + _family.replace(".", "_").replace("@", "_at_"), _test(_family, _lib, _build))


def _test_more(family, library, build):
    @unittest.skipIf(not FULL, "a family the issue did not name: runs with REMAT_FULL=1 (tools/ci_full.sh)")
    def test(self):
        self.check_family(family, library, build)
    return test


for _family, _lib, _build in MORE_FAMILIES:
    setattr(ModelsTest, "test_more_" + _family.replace(".", "_"), _test_more(_family, _lib, _build))


if __name__ == "__main__":
    base._reexec_with_torch()
    unittest.main()
