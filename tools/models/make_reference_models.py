#!/usr/bin/env python3
"""Tiny random-weight models in HF (safetensors) and GGUF form, with reference
outputs from HF transformers, for the cpu backend's model tests.

Rerun (deterministic; rewrites tests/kernels/cpu/model/fixtures/):
    python3 -m venv /work/venv-ref
    /work/venv-ref/bin/pip install -r tools/models/requirements-reference.txt
    /work/venv-ref/bin/python tools/models/make_reference_models.py          # tiny models
    /work/venv-ref/bin/python tools/models/make_smollm2_reference.py         # default model

Models (vocab 256 byte tokens, hidden 64, 4 heads of 16, 2 layers, 256 positions):
    llama             LlamaForCausalLM, 2 KV heads, rope_theta 1e4, untied lm_head
    llama-tied        same, tied embeddings, rope_theta 1e5, linear rope scaling x2
    falcon-7b-style   FalconForCausalLM, parallel attn, multi-query (1 KV head),
                      single input_layernorm, tied embeddings
    falcon-40b-style  FalconForCausalLM, new_decoder_architecture, 2 KV heads,
                      ln_attn + ln_mlp, untied lm_head
Per model: <name>/ (config.json + model.safetensors, float32), <name>.gguf, and
<name>.reference.json = {prompt [24], logits [24][256], greedy [16], ...}.
Variants: llama-sharded/ (>= 2 shards + index), llama-bf16/, llama.gguf is F16,
llama-{q8_0,q4_0,q4_1}.gguf, falcon-40b-style-f16.gguf; each lossy variant has its
own reference (<variant>.reference.json) computed by transformers on the weights
read back (dequantized) from that file.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
import gguf
from transformers import AutoModelForCausalLM, FalconConfig, LlamaConfig

sys.dont_write_bytecode = True  # keep tools/models free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_gguf as rg  # noqa: E402
import reference_numpy_forward as nf  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "kernels" / "cpu" / "model" / "fixtures"
SEED = 1234
PROMPT_LEN = 24
GREEDY_LEN = 16
SOURCE = (f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"gguf-py {importlib.metadata.version('gguf')}, numpy {np.__version__}")
QT = gguf.GGMLQuantizationType


def model_configs() -> dict:
    common = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=256, bos_token_id=1, eos_token_id=2)
    return {
        "llama": LlamaConfig(**common, intermediate_size=128, num_key_value_heads=2, rms_norm_eps=1e-5,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                             tie_word_embeddings=False),
        "llama-tied": LlamaConfig(**common, intermediate_size=128, num_key_value_heads=2, rms_norm_eps=1e-5,
                                  rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 100000.0},
                                  tie_word_embeddings=True),
        # ffn_hidden_size 128 (not Falcon's 4 * hidden) keeps the fixtures small; the
        # GGUF records the true size (the converter writes 4 * hidden, equal for real Falcons).
        "falcon-7b-style": FalconConfig(**common, ffn_hidden_size=128, parallel_attn=True, multi_query=True,
                                        num_kv_heads=1, new_decoder_architecture=False, bias=False, alibi=False,
                                        layer_norm_epsilon=1e-5, activation="gelu", tie_word_embeddings=True,
                                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "falcon-40b-style": FalconConfig(**common, ffn_hidden_size=128, parallel_attn=True,
                                         new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=2,
                                         bias=False, alibi=False, layer_norm_epsilon=1e-5, activation="gelu",
                                         tie_word_embeddings=False,
                                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    }


def build_model(config, seed: int):
    """Random weights, larger than default so logits are far from uniform."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
            else:  # norm weight
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.1)
    model.tie_weights()
    return model.eval()


def hf_state(model) -> dict[str, np.ndarray]:
    """Parameters as the checkpoint holds them (a tied lm_head is omitted)."""
    sd = model.state_dict()
    if model.config.tie_word_embeddings:
        sd = {k: v for k, v in sd.items() if k != "lm_head.weight"}
    return {k: v.detach().float().numpy().copy() for k, v in sd.items()}


def load_state(model, state: dict[str, np.ndarray]):
    missing = set(hf_state(model)) - set(state)
    if missing:
        raise ValueError(f"missing tensors: {sorted(missing)}")
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    model.tie_weights()
    return model


def f9(x: float) -> float:
    """float32-exact and short: %.9g round-trips any float32."""
    return float(f"{float(x):.9g}")


@torch.no_grad()
def reference_outputs(model, prompt: list[int]) -> dict:
    ids = torch.tensor([prompt])
    logits = model(input_ids=ids, use_cache=False).logits[0]  # [T, vocab]
    out = model(input_ids=ids, use_cache=True)
    past, step_logits = out.past_key_values, out.logits[0, -1]
    greedy, margins = [], []
    for _ in range(GREEDY_LEN):
        top2 = torch.topk(step_logits, 2).values
        margins.append(f9(top2[0] - top2[1]))
        nxt = int(torch.argmax(step_logits))
        greedy.append(nxt)
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past, step_logits = out.past_key_values, out.logits[0, -1]
    # the cached decode must agree with a full recompute
    full = model(input_ids=torch.tensor([prompt + greedy]), use_cache=False).logits[0]
    recomputed = full[PROMPT_LEN - 1:-1].argmax(-1).tolist()
    if recomputed != greedy:
        raise RuntimeError(f"cached greedy {greedy} != recomputed {recomputed}")
    return {"prompt": prompt, "logits": [[f9(v) for v in row] for row in logits.tolist()],
            "greedy": greedy, "greedy_top2_margins": margins, "eos_token_id": model.config.eos_token_id,
            "notes": "greedy runs exactly 16 steps and does not stop at eos; "
                     "greedy_top2_margins[i] = top1 - top2 logit before choosing greedy[i]"}


def write_reference(name: str, model, prompt, weights: str, extra: dict | None = None) -> dict:
    ref = reference_outputs(model, prompt)
    ref = {"model": name, "weights": weights, **ref, "source": SOURCE, **(extra or {})}
    (FIXTURES / f"{name}.reference.json").write_text(json.dumps(ref, separators=(",", ":")) + "\n")
    return ref


def numpy_check(path: Path, config, prompt, want: np.ndarray, tol: float = 2e-3) -> float:
    """Independent GGUF-layout forward; must match transformers' logits."""
    t = rg.read_gguf_tensors(path)
    cfg = {"n_layer": config.num_hidden_layers, "n_head": config.num_attention_heads}
    if config.model_type == "llama":
        rope = config.rope_parameters
        cfg.update(n_head_kv=config.num_key_value_heads, eps=config.rms_norm_eps, rope_base=rope["rope_theta"],
                   rope_scale=1.0 / rope.get("factor", 1.0) if rope.get("rope_type") == "linear" else 1.0)
        got = nf.llama_logits(t, cfg, prompt)
    else:
        cfg.update(n_head_kv=rg.falcon_kv_heads(config), eps=config.layer_norm_epsilon)
        got = nf.falcon_logits(t, cfg, prompt)
    err = float(np.max(np.abs(got - want)))
    if err > tol:
        raise RuntimeError(f"{path.name}: numpy GGUF-layout forward differs from transformers by {err}")
    return err


def lossy_variant(variant: str, config, path: Path, prompt, seed: int, source_desc: str) -> None:
    """Reference for weights read back from a lossy file (F16/BF16/quantized)."""
    model = build_model(config, seed)
    names = list(hf_state(model))
    if path.suffix == ".gguf":
        state = rg.gguf_to_hf_state(path, config, names)
    else:
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
        state = hf_state(loaded)
    load_state(model, state)
    ref = write_reference(variant, model, prompt, source_desc)
    if path.suffix == ".gguf":
        err = numpy_check(path, config, prompt, np.array(ref["logits"]))
        print(f"  {variant}: numpy GGUF forward max |diff| {err:.2e}")
    if path.suffix == ".gguf" and config.model_type == "llama":
        print(f"  {variant}: transformers' own GGUF loader max |diff| {transformers_gguf_check(path, prompt, ref):.2e}")


@torch.no_grad()
def transformers_gguf_check(path: Path, prompt, ref: dict, tol: float = 1e-4) -> float:
    """Third-party reader: transformers' GGUF loader undoes llama.cpp's Q/K permutation
    itself. (It ignores rope.scaling.* for llama and handles only 4*hidden, 1-KV-group
    Falcon files, so it is used for the unscaled llama files only.)"""
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    got = model(input_ids=torch.tensor([prompt]), use_cache=False).logits[0].numpy()
    err = float(np.max(np.abs(got - np.array(ref["logits"]))))
    if err > tol:
        raise RuntimeError(f"{path.name}: transformers' GGUF loader disagrees by {err}")
    return err


def main() -> None:
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for p in FIXTURES.iterdir():  # make_smollm2_reference.py owns smollm2-*
        if not p.name.startswith("smollm2-"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    prompt = np.random.RandomState(SEED).randint(0, 256, size=PROMPT_LEN).tolist()
    for index, (name, config) in enumerate(model_configs().items()):
        seed = SEED + index
        print(f"{name} (seed {seed})")
        model = build_model(config, seed)
        model.save_pretrained(FIXTURES / name)
        state = hf_state(model)
        ref = write_reference(name, model, prompt, f"{name}/model.safetensors (float32)")
        want = np.array(ref["logits"])

        if name == "llama":
            model.save_pretrained(FIXTURES / "llama-sharded", max_shard_size="150KB")
            model.to(torch.bfloat16).save_pretrained(FIXTURES / "llama-bf16")
            lossy_variant("llama-bf16", config, FIXTURES / "llama-bf16", prompt, seed,
                          "llama-bf16/model.safetensors (bfloat16) upcast to float32")
            for qtype, variant, fname in ((QT.F16, "llama-f16", "llama.gguf"), (QT.Q8_0, "llama-q8_0", None),
                                          (QT.Q4_0, "llama-q4_0", None), (QT.Q4_1, "llama-q4_1", None)):
                path = FIXTURES / (fname or f"{variant}.gguf")
                rg.write_gguf(path, state, config, name, qtype)
                lossy_variant(variant, config, path, prompt, seed, f"{path.name} dequantized to float32")
        else:
            path = FIXTURES / f"{name}.gguf"
            rg.write_gguf(path, state, config, name, QT.F32)
            back = rg.gguf_to_hf_state(path, config, list(state))
            if set(back) != set(state) or any(not np.array_equal(back[k], state[k]) for k in state):
                raise RuntimeError(f"{path.name}: F32 GGUF does not read back to the HF weights")
            print(f"  {name}.gguf: numpy GGUF forward max |diff| {numpy_check(path, config, prompt, want):.2e}")
            if name == "falcon-40b-style":
                path = FIXTURES / f"{name}-f16.gguf"
                rg.write_gguf(path, state, config, name, QT.F16)
                lossy_variant(f"{name}-f16", config, path, prompt, seed, f"{path.name} dequantized to float32")

    total = 0
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file():
            total += p.stat().st_size
            print(f"{p.stat().st_size:>9}  {p.relative_to(FIXTURES)}")
    print(f"{total:>9}  total")


if __name__ == "__main__":
    main()
