#!/usr/bin/env python3
"""End-to-end reference for the default model (SmolLM2-135M-Instruct, Q4_1 GGUF).

Rerun (needs models/SmolLM2-135M-Instruct.Q4_1.gguf, see tools/models/fetch_default_model.sh):
    /work/venv-ref/bin/pip install -r tools/models/requirements-reference.txt
    /work/venv-ref/bin/python tools/models/make_smollm2_reference.py

transformers loads model and tokenizer from the GGUF (dequantizing Q4_1/Q8_0 to
float32 and undoing llama.cpp's Q/K permutation). Before trusting that, the
weights are checked against our own dequantization (gguf.quants) + un-permute.
Writes into tests/kernels/cpu/model/fixtures/:
  smollm2-chat.reference.json    chat prompt -> greedy reply (<= 48 tokens, stops at <|im_end|>)
  smollm2-logits.reference.json  prompt's last-position top-20 and logits of ids 0..63,
                                 plus the top-5 at every prompt position
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
import gguf
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.dont_write_bytecode = True  # keep tools/models free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_gguf as rg  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "models"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FIXTURES = ROOT / "tests" / "kernels" / "cpu" / "model" / "fixtures"
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
MAX_NEW_TOKENS = 48
SOURCE = (f"transformers {transformers.__version__} (GGUF loader, float32, eager attention), "
          f"torch {torch.__version__}, gguf-py {importlib.metadata.version('gguf')}")


def f9(x) -> float:
    return float(f"{float(x):.9g}")


def check_weights(model) -> None:
    """transformers' dequantized weights == gguf.quants dequantize + our un-permute."""
    cfg = model.config
    gguf_tensors = rg.read_gguf_tensors(MODEL_DIR / GGUF_FILE)
    checks = {
        "model.embed_tokens.weight": gguf_tensors["token_embd.weight"],
        "model.layers.0.self_attn.q_proj.weight": rg.unpermute_qk(gguf_tensors["blk.0.attn_q.weight"],
                                                                  cfg.num_attention_heads),
        "model.layers.17.self_attn.k_proj.weight": rg.unpermute_qk(gguf_tensors["blk.17.attn_k.weight"],
                                                                   cfg.num_key_value_heads),
        "model.layers.29.mlp.down_proj.weight": gguf_tensors["blk.29.ffn_down.weight"],
        "model.norm.weight": gguf_tensors["output_norm.weight"],
    }
    state = model.state_dict()
    for name, want in checks.items():
        got = state[name].float().numpy()
        if got.shape != want.shape or not np.array_equal(got, want):
            raise RuntimeError(f"{name}: transformers' GGUF weights differ from gguf.quants dequantization")
    if not torch.equal(model.lm_head.weight, model.model.embed_tokens.weight):
        raise RuntimeError("lm_head is not tied to the embeddings")


@torch.no_grad()
def greedy_chat(model, prompt_ids: list[int], eos_id: int) -> dict:
    out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
    past, step = out.past_key_values, out.logits[0, -1]
    first = torch.topk(step, 5)
    top5 = [[int(i), f9(v)] for v, i in zip(first.values, first.indices)]
    generated, margins, stopped = [], [], False
    for _ in range(MAX_NEW_TOKENS):
        top2 = torch.topk(step, 2).values
        margins.append(f9(top2[0] - top2[1]))
        nxt = int(torch.argmax(step))
        generated.append(nxt)
        if nxt == eos_id:
            stopped = True
            break
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past, step = out.past_key_values, out.logits[0, -1]
    full = model(input_ids=torch.tensor([prompt_ids + generated]), use_cache=False).logits[0]
    recomputed = full[len(prompt_ids) - 1:].argmax(-1).tolist()[: len(generated)]
    if recomputed != generated:
        raise RuntimeError(f"cached greedy {generated} != recomputed {recomputed}")
    return {"generated_ids": generated, "stopped_at_eos": stopped, "first_step_top5": top5,
            "top2_margins": margins}


@torch.no_grad()
def prompt_logits(model, prompt_ids: list[int]) -> dict:
    logits = model(input_ids=torch.tensor([prompt_ids]), use_cache=False).logits[0]  # [T, vocab]
    last = logits[-1]
    top20 = torch.topk(last, 20)
    per_pos = torch.topk(logits, 5, dim=-1)
    return {
        "last_position_top20": [[int(i), f9(v)] for v, i in zip(top20.values, top20.indices)],
        "last_position_logits_ids_0_to_63": [f9(v) for v in last[:64].tolist()],
        "top5_per_position": [[[int(i), f9(v)] for v, i in zip(vals, ids)]
                              for vals, ids in zip(per_pos.values, per_pos.indices)],
    }


def main() -> None:
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, gguf_file=GGUF_FILE, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    check_weights(model)

    text = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False).input_ids
    via_template = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=False)
    if list(via_template) != ids:
        raise RuntimeError(f"tokenizing the rendered prompt {ids} != apply_chat_template ids {via_template}")
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    assert eos_id == 2, eos_id

    chat = greedy_chat(model, ids, eos_id)
    gen = chat["generated_ids"]
    chat_ref = {
        "model": GGUF_FILE, "messages": MESSAGES, "prompt_text": text, "prompt_ids": ids,
        **chat,
        "generated_text": tok.decode(gen, skip_special_tokens=False),
        "generated_text_without_special": tok.decode(gen, skip_special_tokens=True),
        "eos_token_id": eos_id, "max_new_tokens": MAX_NEW_TOKENS,
        "notes": "greedy (argmax) with KV cache; top2_margins[i] = top1 - top2 logit before choosing "
                 "generated_ids[i]; the final id is <|im_end|> when stopped_at_eos",
        "source": SOURCE,
    }
    logits_ref = {"model": GGUF_FILE, "prompt_ids": ids, **prompt_logits(model, ids), "source": SOURCE}
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / "smollm2-chat.reference.json").write_text(json.dumps(chat_ref, indent=1) + "\n")
    (FIXTURES / "smollm2-logits.reference.json").write_text(json.dumps(logits_ref, separators=(",", ":")) + "\n")
    print(repr(text))
    print(ids)
    print(gen, repr(chat_ref["generated_text"]))
    print("min margin", min(chat["top2_margins"]), "top5", chat["first_step_top5"])


if __name__ == "__main__":
    main()
