"""Models of transformers, torchvision and timm that the models test does
not run, each run as the test runs its families (tools/
torch_export_models_test.py's check_family): built from its library's
config, small and random-init, in training mode, its checkpointing switch on
where it has one; exported; eager and recompute bit for bit; loss, every
gradient and BatchNorm state judged against float64 with kinks allowed for
(tools/model_judge.py); the judgement shown to fail on a moved element; and
again with dropout on, eager against recompute. Each model runs in a process
of its own, within --timeout seconds; one Markdown row each: PASS, or FAIL
with the first lines of what stopped it (an ExportError names the module
path and ATen op).

    .venv/bin/python tools/examples/model_sweep.py               # every model (about 2 hours on 2 cores)
    .venv/bin/python tools/examples/model_sweep.py mamba timm.tnt hf.swin
    .venv/bin/python tools/examples/model_sweep.py --list

Needs tools/remat built (tools/bazel build //tools:remat).
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
sys.path.insert(0, TOOLS)

import torch_export_models_test as models  # noqa: E402

REMAT = os.path.join(os.path.dirname(TOOLS), "bazel-bin", "tools", "remat")


def _hf(cls_name, config_name, **config):
    return "transformers", models._hf_more(cls_name, config_name, **config)


def _hfv(cls_name, config_name, size=32, **config):
    return "transformers", models._hf_vision(cls_name, config_name, size, **config)


def _tv(name, size=64, **kw):
    return "torchvision", models._vision_more(models._tv(name, **kw), size)


def _tm(name, size=64, batch=2, **kw):
    return "timm", models._vision_more(models._timm(name, **kw), size, batch)


def _vit_mae(dropout):
    """ViT-MAE pretraining: its random masking's noise passed in, as
    transformers lets a caller control it, so that the float32 and float64
    runs mask the same patches; the patches kept (argsort of the noise)
    fixed at export."""
    import torch
    build = models._hf_vision("ViTMAEForPreTraining", "ViTMAEConfig", 32, decoder_hidden_size=32,
                              decoder_num_hidden_layers=1, decoder_num_attention_heads=4,
                              decoder_intermediate_size=64, **{k: v for k, v in _VIT.items() if k != "num_labels"})
    m, inputs, loss, loss_inputs, calls = build(dropout)
    inputs = {"pixel_values": inputs["pixel_values"], "noise": torch.rand(2, (32 // 8) ** 2)}
    return m, inputs, loss, loss_inputs, calls, {"fixed_decisions": True}


_DEC = models._DECODER
_LM = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
           max_position_embeddings=32)
_SEQ2SEQ = dict(vocab_size=64, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32)
_VIT = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, num_labels=3)
MODELS = {
    # transformers, language models
    "gptj": _hf("GPTJForCausalLM", "GPTJConfig", vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                rotary_dim=4),
    "falcon": _hf("FalconForCausalLM", "FalconConfig", vocab_size=64, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4),
    "stablelm": _hf("StableLmForCausalLM", "StableLmConfig", num_key_value_heads=2, **_DEC),
    "phi": _hf("PhiForCausalLM", "PhiConfig", **_DEC),
    "codegen": _hf("CodeGenForCausalLM", "CodeGenConfig", vocab_size=64, n_embd=32, n_layer=2, n_head=4,
                   n_positions=32, rotary_dim=4),
    "gpt_bigcode": _hf("GPTBigCodeForCausalLM", "GPTBigCodeConfig", vocab_size=64, n_embd=32, n_layer=2, n_head=4,
                       n_positions=32),
    "olmo": _hf("OlmoForCausalLM", "OlmoConfig", **_DEC),
    "olmo2": _hf("Olmo2ForCausalLM", "Olmo2Config", **_DEC),
    "cohere": _hf("CohereForCausalLM", "CohereConfig", **_DEC),
    "granite": _hf("GraniteForCausalLM", "GraniteConfig", **_DEC),
    "starcoder2": _hf("Starcoder2ForCausalLM", "Starcoder2Config", num_key_value_heads=2, **_DEC),
    "gemma3": _hf("Gemma3ForCausalLM", "Gemma3TextConfig", num_key_value_heads=2, head_dim=8, **_DEC),
    "glm": _hf("GlmForCausalLM", "GlmConfig", num_key_value_heads=2, head_dim=8, pad_token_id=0, **_DEC),
    "nemotron": _hf("NemotronForCausalLM", "NemotronConfig", num_key_value_heads=2, **_DEC),
    "helium": _hf("HeliumForCausalLM", "HeliumConfig", num_key_value_heads=2, head_dim=8, **_DEC),
    "llama_tied": _hf("LlamaForCausalLM", "LlamaConfig", num_key_value_heads=2, tie_word_embeddings=True, **_DEC),
    "gpt2_scaled": _hf("GPT2LMHeadModel", "GPT2Config", n_embd=32, n_layer=2, n_head=4, n_positions=32,
                       vocab_size=64, scale_attn_by_inverse_layer_idx=True, reorder_and_upcast_attn=True),
    "gpt_neo": _hf("GPTNeoForCausalLM", "GPTNeoConfig", vocab_size=64, hidden_size=32, num_layers=2, num_heads=4,
                   max_position_embeddings=32, attention_types=[[["global", "local"], 1]], window_size=4),
    "mamba": _hf("MambaForCausalLM", "MambaConfig", vocab_size=64, hidden_size=32, num_hidden_layers=2,
                 state_size=4),
    "xglm": _hf("XGLMForCausalLM", "XGLMConfig", vocab_size=64, d_model=32, ffn_dim=64, num_layers=2,
                attention_heads=4, max_position_embeddings=32),
    # Mixtures of experts: the routing fixed at export (export's fixed_decisions).
    "qwen2_moe": _hf("Qwen2MoeForCausalLM", "Qwen2MoeConfig", num_key_value_heads=2, num_experts=4,
                     num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=32,
                     export_options={"fixed_decisions": True}, **_DEC),
    "mixtral": _hf("MixtralForCausalLM", "MixtralConfig", num_key_value_heads=2, num_local_experts=4,
                   num_experts_per_tok=2, export_options={"fixed_decisions": True}, **_DEC),
    # transformers, encoders and encoder-decoders
    "albert": _hf("AlbertForMaskedLM", "AlbertConfig", embedding_size=16, **_LM),
    "electra": _hf("ElectraForMaskedLM", "ElectraConfig", embedding_size=16, **_LM),
    "deberta_v2": _hf("DebertaV2ForMaskedLM", "DebertaV2Config", **_LM),
    "xlm_roberta": _hf("XLMRobertaForMaskedLM", "XLMRobertaConfig", **dict(_LM, max_position_embeddings=40)),
    "mobilebert": _hf("MobileBertForMaskedLM", "MobileBertConfig", embedding_size=16, intra_bottleneck_size=16,
                      true_hidden_size=16, **_LM),
    "roformer": _hf("RoFormerForMaskedLM", "RoFormerConfig", **_LM),
    "funnel": _hf("FunnelForMaskedLM", "FunnelConfig", vocab_size=64, d_model=32, n_head=4, d_head=8, d_inner=64,
                  block_sizes=[1, 1], num_decoder_layers=1),
    "pegasus": _hf("PegasusForConditionalGeneration", "PegasusConfig", **_SEQ2SEQ),
    "mbart": _hf("MBartForConditionalGeneration", "MBartConfig", **_SEQ2SEQ),
    "marian": _hf("MarianMTModel", "MarianConfig", decoder_start_token_id=0, pad_token_id=1, **_SEQ2SEQ),
    # transformers, vision (their drop path at 0.1 with dropout on)
    "hf.vit": _hfv("ViTForImageClassification", "ViTConfig", **_VIT),
    "hf.deit": _hfv("DeiTForImageClassification", "DeiTConfig", **_VIT),
    "hf.beit": _hfv("BeitForImageClassification", "BeitConfig", use_relative_position_bias=True, **_VIT),
    "hf.data2vec_vision": _hfv("Data2VecVisionForImageClassification", "Data2VecVisionConfig", **_VIT),
    "hf.dinov2": _hfv("Dinov2ForImageClassification", "Dinov2Config", image_size=32, patch_size=8, hidden_size=32,
                      num_hidden_layers=2, num_attention_heads=4, num_labels=3),
    "hf.vit_mae": ("transformers", _vit_mae),
    "hf.convnext": _hfv("ConvNextForImageClassification", "ConvNextConfig", 64, hidden_sizes=[8, 16, 32, 64],
                        depths=[1, 1, 2, 1], num_labels=3),
    "hf.convnextv2": _hfv("ConvNextV2ForImageClassification", "ConvNextV2Config", 64, hidden_sizes=[8, 16, 32, 64],
                          depths=[1, 1, 2, 1], num_labels=3),
    "hf.resnet": _hfv("ResNetForImageClassification", "ResNetConfig", 64, embedding_size=16,
                      hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_labels=3),
    "hf.swin": _hfv("SwinForImageClassification", "SwinConfig", 32, image_size=32, patch_size=2, embed_dim=16,
                    depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=3),
    "hf.swinv2": _hfv("Swinv2ForImageClassification", "Swinv2Config", 32, image_size=32, patch_size=2, embed_dim=16,
                      depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=3),
    "hf.mobilevit": _hfv("MobileViTForImageClassification", "MobileViTConfig", 64, image_size=64, num_labels=3),
    "hf.segformer": _hfv("SegformerForImageClassification", "SegformerConfig", 64, num_labels=3),
    "hf.poolformer": _hfv("PoolFormerForImageClassification", "PoolFormerConfig", 64, num_labels=3),
    "hf.mobilenet_v2": _hfv("MobileNetV2ForImageClassification", "MobileNetV2Config", 64, image_size=64,
                            num_labels=3, depth_multiplier=0.35),
    # Its classifier is a BatchNorm1d over the batch: over 2 samples near
    # sqrt(eps) apart it amplifies any float32 error (PyTorch's too) about
    # 300 times and the judgement is noise; 8 images.
    "hf.levit": _hfv("LevitForImageClassification", "LevitConfig", 128, batch=8, image_size=128, num_labels=3),
    # torchvision
    "tv.resnet34": _tv("resnet34"),
    "tv.resnext50": _tv("resnext50_32x4d"),
    "tv.wide_resnet50_2": _tv("wide_resnet50_2"),
    "tv.mnasnet": _tv("mnasnet0_5"),
    "tv.efficientnet_v2_s": _tv("efficientnet_v2_s"),
    "tv.convnext_tiny": _tv("convnext_tiny"),
    "tv.regnet_x_400mf": _tv("regnet_x_400mf"),
    "tv.densenet121": _tv("densenet121"),
    "tv.mobilenet_v3_large": _tv("mobilenet_v3_large"),
    "tv.vit_b_32": _tv("vit_b_32", 64, image_size=64),
    "tv.swin_s": _tv("swin_s"),
    "tv.maxvit_t": _tv("maxvit_t", 224),
}
# timm, by its own names: (model, image side, create_model's arguments).
for _name, _size, _kw in (
        ("resnet50d", 64, {}), ("legacy_seresnet18", 64, {}), ("ecaresnet26t", 64, {}), ("cspdarknet53", 64, {}),
        ("cspresnet50", 64, {}), ("darknet53", 64, {}), ("dla34", 64, {}), ("hrnet_w18_small", 64, {}),
        ("res2net50_14w_8s", 64, {}), ("resnest14d", 64, {}), ("skresnet18", 64, {}), ("dpn68", 64, {}),
        ("regnetz_b16", 64, {}), ("regnety_002", 64, {}), ("efficientnetv2_rw_t", 64, {}), ("mixnet_s", 64, {}),
        ("tinynet_e", 64, {}), ("fbnetv3_b", 64, {}), ("hardcorenas_a", 64, {}), ("lcnet_050", 64, {}),
        ("ghostnetv2_100", 64, {}), ("repghostnet_050", 64, {"drop_rate": 0.0}), ("rexnet_100", 64, {}),
        ("repvit_m0_9", 64, {}), ("hgnetv2_b0", 64, {}), ("ese_vovnet19b_dw", 64, {}), ("selecsls42b", 64, {}),
        ("densenet121", 64, {}), ("rdnet_tiny", 64, {}), ("inception_next_tiny", 64, {}),
        ("starnet_s1", 64, {}), ("mambaout_femto", 64, {}), ("mobilevit_xxs", 64, {}),
        ("mobilevitv2_050", 64, {}), ("edgenext_xx_small", 64, {}), ("efficientformer_l1", 224, {}),
        ("botnet26t_256", 64, {"img_size": 64}), ("halonet26t", 256, {}), ("tnt_s_patch16_224", 64, {"img_size": 64}),
        ("mixer_s32_224", 64, {"img_size": 64}), ("resmlp_12_224", 64, {"img_size": 64}),
        ("gmlp_ti16_224", 64, {"img_size": 64}), ("cait_xxs24_224", 64, {"img_size": 64}),
        ("crossvit_tiny_240", 240, {}), ("pvt_v2_b0", 64, {}), ("twins_pcpvt_small", 64, {}),
        ("coat_lite_tiny", 224, {}), ("beit_base_patch16_224", 64, {"img_size": 64, "depth": 2}),
        ("deit3_small_patch16_224", 64, {"img_size": 64, "depth": 2}), ("volo_d1_224", 64, {"img_size": 64}),
        ("tiny_vit_5m_224", 64, {}), ("davit_tiny", 64, {}), ("focalnet_tiny_srf", 64, {}),
        ("hiera_tiny_224", 64, {"img_size": 64}), ("gcvit_xxtiny", 64, {"img_size": 64}),
        ("eva02_tiny_patch14_224", 56, {"img_size": 56}),
        ("vit_relpos_small_patch16_224", 64, {"img_size": 64, "depth": 2}), ("nest_tiny", 64, {"img_size": 64}),
        ("sequencer2d_s", 64, {}), ("vit_small_patch16_224", 64, {"img_size": 64, "depth": 2}),
        ("convit_tiny", 64, {"img_size": 64}), ("pit_ti_224", 64, {"img_size": 64}),
        ("mvitv2_tiny", 64, {"img_size": 64})):
    MODELS["timm." + _name] = _tm(_name, _size, **_kw)
# ReXNet's squeeze-excite modules hold a BatchNorm over (N, C, 1, 1): over 2
# samples the same ill-conditioned head as LeViT's; 8 images.
MODELS["timm.rexnet_100"] = _tm("rexnet_100", 64, batch=8)


def one(name):
    """Runs one model as the models test runs a family; prints RESULT."""
    def remat(self, *args):
        r = subprocess.run([REMAT] + list(args), capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="passive"))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout
    models.ModelsTest.remat = remat
    library, build = MODELS[name]
    test = models.ModelsTest("test_gpt2")
    test.check_family(name, library, build)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="models to run (default: every one)")
    parser.add_argument("--timeout", type=float, default=400, help="seconds per model")
    parser.add_argument("--list", action="store_true", help="print the models' names and stop")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one)
        return
    if args.list:
        print("\n".join(MODELS))
        return
    for name in args.names:
        if name not in MODELS:
            parser.error("no model %r (--list names them)" % name)
    if not os.path.exists(REMAT):
        parser.error("%s is not built: tools/bazel build //tools:remat" % REMAT)
    print("| model | library | verdict | s | what stopped it |")
    print("| --- | --- | --- | ---: | --- |")
    passed = 0
    names = args.names or list(MODELS)
    for name in names:
        start = time.time()
        try:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name], capture_output=True,
                               text=True, timeout=args.timeout)
            ok, why = r.returncode == 0, _reason(r.stderr)
        except subprocess.TimeoutExpired:
            ok, why = False, "ran past %g s" % args.timeout
        passed += ok
        print("| %s | %s | %s | %.0f | %s |" % (name, MODELS[name][0], "PASS" if ok else "FAIL", time.time() - start,
                                              why if not ok else ""), flush=True)
    print("\n%d of %d pass" % (passed, len(names)))


def _reason(stderr):
    """The first lines of the exception that ended a run, on one line."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if not ln.startswith(" ") and ("Error" in ln.split(":")[0] or "Exception" in ln.split(":")[0]):
            return " / ".join(x.strip() for x in lines[i:i + 4]).replace("|", "\\|")[:400]
    return (lines[-1] if lines else "").replace("|", "\\|")[:400]


if __name__ == "__main__":
    main()
