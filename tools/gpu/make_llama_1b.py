#!/usr/bin/env python3
"""A Llama-shaped model of about 1.2 B parameters with random weights, as an HF safetensors folder
that both `actorlm serve` (engine.backend = "cuda") and HF transformers load: issue 13's
end-to-end benchmark model. Llama-3.2-1B's shape (hidden 2048, 16 layers, 32 query / 8 KV heads
of 64, FFN 8192, tied embeddings) with a vocabulary of 128256; weights N(0, 0.02) in bf16, norms 1.
The tokenizer is SmolLM2's (tests/model/tokenizer/fixtures/smollm2/tokenizer.json, 49152 tokens:
the model's extra embedding rows are never produced by it). Needs torch and transformers.

Usage: make_llama_1b.py OUT_DIR
"""
import json
import shutil
import sys
from pathlib import Path

CONFIG = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
              num_key_value_heads=8, head_dim=64, vocab_size=128256, tie_word_embeddings=True,
              max_position_embeddings=4096, rope_theta=500000.0, pad_token_id=0, bos_token_id=1,
              eos_token_id=2, rms_norm_eps=1e-5)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = Path(sys.argv[1])
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"make_llama_1b: skipped ({e})")
        return 77
    root = Path(__file__).resolve().parents[2]
    torch.manual_seed(0)
    cfg = LlamaConfig(**CONFIG)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    shutil.copy(root / "tests/model/tokenizer/fixtures/smollm2/tokenizer.json", out / "tokenizer.json")
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"model": str(out), "parameters": params}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
