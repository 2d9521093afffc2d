#!/usr/bin/env python3
"""Golden data for the reference decode step, from Hugging Face's GlmMoeDsa.

Runs on a machine with torch and transformers 5.17 (the GPU machine's
python3; nothing to install). For every case that moetune-golden-export
wrote, it builds transformers' GlmMoeDsaForCausalLM at the exported dims in
float32 on the CPU, loads exactly the reference's weights, injects the
reference's synthetic caches into a DynamicCache (the rotated parts
de-interleaved into Hugging Face's layout), decodes one token, and records
what transformers computed: the logits, each decoder layer's output and its
MLP block's output, and the indexer's kept sets. The CI test
tests/kernels/reference/hf_golden_test.cc replays the reference against it.

  python3 tests/golden/hf_golden.py --export build/bin/moetune-golden-export \\
      --out tests/data/hf_glm_moe_dsa_golden.json
"""

import argparse
import base64
import datetime
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file
from transformers import DynamicCache, GlmMoeDsaConfig, GlmMoeDsaForCausalLM

SCRIPT_VERSION = 1
EXPECTED_TRANSFORMERS = "5.17"


def make_config(dims):
    """GlmMoeDsaConfig at the exported dims; GLM-5's rope parameters."""
    config = GlmMoeDsaConfig(
        vocab_size=dims["vocab_size"],
        hidden_size=dims["hidden_size"],
        intermediate_size=dims["intermediate_size"],
        moe_intermediate_size=dims["moe_intermediate_size"],
        num_hidden_layers=dims["num_hidden_layers"],
        num_attention_heads=dims["num_attention_heads"],
        num_key_value_heads=dims["num_key_value_heads"],
        n_shared_experts=dims["n_shared_experts"],
        n_routed_experts=dims["n_routed_experts"],
        routed_scaling_factor=dims["routed_scaling_factor"],
        kv_lora_rank=dims["kv_lora_rank"],
        q_lora_rank=dims["q_lora_rank"],
        qk_rope_head_dim=dims["qk_rope_head_dim"],
        v_head_dim=dims["v_head_dim"],
        qk_nope_head_dim=dims["qk_nope_head_dim"],
        n_group=1,
        topk_group=1,
        num_experts_per_tok=dims["num_experts_per_tok"],
        norm_topk_prob=True,
        first_k_dense_replace=dims["first_k_dense_replace"],
        rms_norm_eps=dims["rms_norm_eps"],
        index_topk=dims["index_topk"],
        index_head_dim=dims["index_head_dim"],
        index_n_heads=dims["index_n_heads"],
        tie_word_embeddings=False,
        pad_token_id=None,
        max_position_embeddings=4096,
        # Without it transformers would take theta 10000; GLM-5's is 1e6.
        rope_parameters={"rope_type": "default",
                         "rope_theta": dims["rope_theta"]},
    )
    config._attn_implementation = "eager"
    return config


def load_weights(model, tensors):
    """Copies every exported weight into its parameter or buffer; fails
    loudly on a name or shape that does not match."""
    targets = dict(model.named_parameters())
    targets.update(dict(model.named_buffers()))
    loaded, problems = set(), []
    for name, value in tensors.items():
        if name.startswith(("cache.", "ref.")) or name == "input_ids":
            continue
        if name not in targets:
            problems.append("unexpected tensor " + name)
            continue
        target = targets[name]
        if tuple(target.shape) != tuple(value.shape):
            problems.append("%s: exported %s, model has %s"
                            % (name, tuple(value.shape), tuple(target.shape)))
            continue
        with torch.no_grad():
            target.copy_(value.to(target.dtype))
        loaded.add(name)
    for name in dict(model.named_parameters()):
        if name not in loaded:
            problems.append("parameter not exported: " + name)
    if problems:
        sys.exit("weights do not match the model:\n  " + "\n  ".join(problems))


def deinterleave(x):
    """The reference's in-place interleaved rotated layout -> Hugging
    Face's (the rotated evens, then the rotated odds)."""
    return torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)


def build_cache(model, tensors, context):
    """A DynamicCache holding the reference's synthetic past: expanded K/V
    from its latents and rope keys, and its indexer keys."""
    config = model.config
    rope = config.qk_rope_head_dim
    cache = DynamicCache(config=config)
    if context == 0:
        return cache
    for l, layer in enumerate(model.model.layers):
        latent = tensors["cache.latent.%d" % l]            # [B, T, kv_lora]
        rope_key = deinterleave(tensors["cache.rope.%d" % l])  # [B, T, rope]
        index_key = tensors["cache.index.%d" % l].clone()  # [B, T, dim]
        index_key[..., :rope] = deinterleave(index_key[..., :rope])
        keys, values = layer.self_attn.expand_kv(latent[:, None],
                                                 rope_key[:, None])
        cache.layers[l].update(keys, values)
        cache.layers[l].update_indexer(index_key)
    return cache


def first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def decode(model, tensors, context):
    """One decode step with hooks on every layer; what it computed."""
    ids = tensors["input_ids"].long().view(-1, 1)
    batch = ids.shape[0]
    positions = torch.full((batch, 1), context, dtype=torch.long)
    seen = {"hidden": {}, "mlp": {}, "kept": {}}
    hooks = []
    for l, layer in enumerate(model.model.layers):
        hooks.append(layer.register_forward_hook(
            lambda m, i, o, l=l: seen["hidden"].__setitem__(l, first(o))))
        hooks.append(layer.mlp.register_forward_hook(
            lambda m, i, o, l=l: seen["mlp"].__setitem__(l, first(o))))
        hooks.append(layer.self_attn.register_forward_hook(
            lambda m, i, o, l=l: seen["kept"].__setitem__(l, o[2])))
    try:
        with torch.no_grad():
            out = model(input_ids=ids, position_ids=positions,
                        past_key_values=build_cache(model, tensors, context),
                        use_cache=True)
    finally:
        for hook in hooks:
            hook.remove()
    return out.logits[:, -1], seen


def b64(tensor):
    array = tensor.detach().to(torch.float32).contiguous().cpu().numpy()
    return base64.b64encode(array.astype("<f4").tobytes()).decode("ascii")


def rel_l2(a, b):
    return float((a - b).norm() / b.norm())


def run_case(config, entry, folder):
    tensors = load_file(os.path.join(folder, entry["file"]))
    case = entry["case"]
    torch.manual_seed(0)  # the weights are all overwritten; keep init cheap
    model = GlmMoeDsaForCausalLM(config).to(torch.float32).eval()
    load_weights(model, tensors)
    logits, seen = decode(model, tensors, case["context"])
    batch = logits.shape[0]
    layers = []
    for l in range(config.num_hidden_layers):
        kept = seen["kept"][l].view(batch, -1)
        layers.append({
            "hidden": b64(seen["hidden"][l].view(batch, -1)),
            "mlp_out": b64(seen["mlp"][l].view(batch, -1)),
            "kept": [sorted(int(i) for i in row) for row in kept.tolist()],
        })
    reference = tensors["ref.logits"]
    agree = (logits.argmax(-1) == reference.argmax(-1)).float().mean()
    print("case %s: logits rel L2 vs the reference %.3g, argmax agreement "
          "%.0f %%" % (json.dumps(case), rel_l2(logits, reference),
                       100 * float(agree)), flush=True)
    return {"case": case, "logits": b64(logits), "layers": layers}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", required=True,
                        help="the moetune-golden-export binary")
    parser.add_argument("--out", required=True, help="golden JSON to write")
    args = parser.parse_args()
    if not transformers.__version__.startswith(EXPECTED_TRANSFORMERS):
        sys.exit("transformers %s; this script is written against %s"
                 % (transformers.__version__, EXPECTED_TRANSFORMERS))
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([args.export, "--out=" + folder], check=True)
        with open(os.path.join(folder, "manifest.json")) as f:
            manifest = json.load(f)
        config = make_config(manifest["config"])
        cases = [run_case(config, entry, folder)
                 for entry in manifest["cases"]]
    golden = {
        "script": "tests/golden/hf_golden.py",
        "script_version": SCRIPT_VERSION,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "generated": datetime.date.today().isoformat(),
        "dtype": "float32",
        "device": "cpu",
        "config": manifest["config"],
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote %d cases to %s" % (len(cases), args.out))


if __name__ == "__main__":
    main()
