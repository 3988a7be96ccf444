#!/usr/bin/env python3
"""HF transformers generate() on the GPU: the baseline of issue 13's end-to-end figure.

A Llama-shaped model of about 1.2 B parameters (Llama-3.2-1B's shape: hidden 2048, 16 layers,
32 query / 8 KV heads, FFN 8192, vocabulary 128256, tied embeddings) with random weights in bf16,
greedy decoding, 128-token prompts, exactly 128 new tokens (no EOS). Output tokens per second:
  one_at_a_time   requests one after another (generate() on a batch of 1)
  batched_64      the same kind of request, 64 prompts in one generate() call
With --model DIR (tools/gpu/make_llama_1b.py's folder) the same weights that actorlm serves.
Usage: hf_generate_baseline.py [--json FILE] [--sequential N] [--model DIR]
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--sequential", type=int, default=3, help="requests timed one at a time")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", help="an HF folder to load instead of random weights")
    args = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"hf_generate_baseline: skipped ({e})")
        return 77
    if not torch.cuda.is_available():
        print("hf_generate_baseline: skipped (no CUDA device)")
        return 77

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=64, vocab_size=128256, tie_word_embeddings=True,
                      max_position_embeddings=4096, rope_theta=500000.0, pad_token_id=0, bos_token_id=1,
                      eos_token_id=None)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    if args.model:
        model = LlamaForCausalLM.from_pretrained(args.model).to(device="cuda", dtype=torch.bfloat16)
        cfg = model.config
    else:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator(device="cuda").manual_seed(1)

    def prompts(n):
        return torch.randint(2, cfg.vocab_size, (n, args.prompt), device="cuda", generator=gen)

    def generate(ids, new):
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False, pad_token_id=0)
        assert out.shape[1] == ids.shape[1] + new, out.shape
        return out

    generate(prompts(1), 8)  # warm-up: kernels, cuBLAS handles
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.sequential):
        generate(prompts(1), args.new)
    torch.cuda.synchronize()
    one = args.sequential * args.new / (time.perf_counter() - t0)

    generate(prompts(args.batch), 8)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    generate(prompts(args.batch), args.new)
    torch.cuda.synchronize()
    batched = args.batch * args.new / (time.perf_counter() - t0)

    result = {"model": "llama-1.2b-random-bf16", "parameters": params, "prompt_tokens": args.prompt,
              "new_tokens": args.new, "torch": torch.__version__, "transformers": transformers.__version__,
              "device": torch.cuda.get_device_name(0), "one_at_a_time_tokens_per_s": round(one, 1),
              f"batched_{args.batch}_tokens_per_s": round(batched, 1)}
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
