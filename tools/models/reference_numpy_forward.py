"""Independent numpy forward pass over GGUF-layout weights (self-check).

It reads tensors in llama.cpp's layout (after the Q/K permutation and the
Falcon QKV reordering) and applies llama.cpp's rotary conventions: rope type
NORM (pairs (2i, 2i+1)) for llama, NEOX (pairs (i, i + head_dim/2)) for falcon.
Agreement with transformers' logits shows the GGUF files follow the
conventions the C++ backend is meant to implement.
"""

from __future__ import annotations

import math

import numpy as np


def _rms_norm(x, w, eps):  # x [T, D]
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _layer_norm(x, w, b, eps):  # x [T, D]
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _rope(x, base, scale, interleaved):  # x [T, H, hd]
    n_tok, _, hd = x.shape
    inv = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)  # [hd/2]
    ang = (np.arange(n_tok, dtype=np.float64)[:, None] * scale) * inv[None, :]  # [T, hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., : hd // 2], x[..., hd // 2:]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if interleaved:
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., : hd // 2], out[..., hd // 2:] = ra, rb
    return out


def _attention(q, k, v):  # q [T, H, hd], k/v [T, Hkv, hd] -> [T, H*hd]
    n_tok, n_head, hd = q.shape
    group = n_head // k.shape[1]
    out = np.empty_like(q)
    mask = np.triu(np.full((n_tok, n_tok), -np.inf), 1)
    for h in range(n_head):
        s = q[:, h] @ k[:, h // group].T / math.sqrt(hd) + mask
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        out[:, h] = (p / p.sum(axis=-1, keepdims=True)) @ v[:, h // group]
    return out.reshape(n_tok, n_head * hd)


def _gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def llama_logits(t: dict, cfg: dict, tokens: list[int]) -> np.ndarray:
    """cfg: n_layer, n_head, n_head_kv, eps, rope_base, rope_scale. Returns [T, vocab]."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    x = t["token_embd.weight"][tokens]  # [T, D]
    n_tok = len(tokens)
    for i in range(cfg["n_layer"]):
        p = f"blk.{i}."
        h = _rms_norm(x, t[p + "attn_norm.weight"], cfg["eps"])
        q = (h @ t[p + "attn_q.weight"].T).reshape(n_tok, cfg["n_head"], -1)
        k = (h @ t[p + "attn_k.weight"].T).reshape(n_tok, cfg["n_head_kv"], -1)
        v = (h @ t[p + "attn_v.weight"].T).reshape(n_tok, cfg["n_head_kv"], -1)
        q = _rope(q, cfg["rope_base"], cfg["rope_scale"], interleaved=True)
        k = _rope(k, cfg["rope_base"], cfg["rope_scale"], interleaved=True)
        x = x + _attention(q, k, v) @ t[p + "attn_output.weight"].T
        h = _rms_norm(x, t[p + "ffn_norm.weight"], cfg["eps"])
        g = h @ t[p + "ffn_gate.weight"].T
        x = x + ((g / (1.0 + np.exp(-g))) * (h @ t[p + "ffn_up.weight"].T)) @ t[p + "ffn_down.weight"].T
    out = t.get("output.weight", t["token_embd.weight"])
    return _rms_norm(x, t["output_norm.weight"], cfg["eps"]) @ out.T


def falcon_logits(t: dict, cfg: dict, tokens: list[int]) -> np.ndarray:
    """cfg: n_layer, n_head, n_head_kv, eps. Rope base 10000 (llama.cpp default). Returns [T, vocab]."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    x = t["token_embd.weight"][tokens]  # [T, D]
    n_tok, n_embd = x.shape
    hd = n_embd // cfg["n_head"]
    nq, nkv = cfg["n_head"] * hd, cfg["n_head_kv"] * hd
    for i in range(cfg["n_layer"]):
        p = f"blk.{i}."
        mlp_in = _layer_norm(x, t[p + "attn_norm.weight"], t[p + "attn_norm.bias"], cfg["eps"])
        attn_in = mlp_in
        if p + "attn_norm_2.weight" in t:  # 40B design: attn_norm_2 feeds attention
            attn_in = _layer_norm(x, t[p + "attn_norm_2.weight"], t[p + "attn_norm_2.bias"], cfg["eps"])
        qkv = attn_in @ t[p + "attn_qkv.weight"].T  # [T, nq + 2 nkv]
        q = qkv[:, :nq].reshape(n_tok, cfg["n_head"], hd)
        k = qkv[:, nq:nq + nkv].reshape(n_tok, cfg["n_head_kv"], hd)
        v = qkv[:, nq + nkv:].reshape(n_tok, cfg["n_head_kv"], hd)
        q = _rope(q, 10000.0, 1.0, interleaved=False)
        k = _rope(k, 10000.0, 1.0, interleaved=False)
        attn = _attention(q, k, v) @ t[p + "attn_output.weight"].T
        mlp = _gelu(mlp_in @ t[p + "ffn_up.weight"].T) @ t[p + "ffn_down.weight"].T
        x = x + attn + mlp
    out = t.get("output.weight", t["token_embd.weight"])
    return _layer_norm(x, t["output_norm.weight"], t["output_norm.bias"], cfg["eps"]) @ out.T
