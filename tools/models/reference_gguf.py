"""HF <-> GGUF weight conversion for the tiny reference models.

Follows llama.cpp's convert_hf_to_gguf.py (LlamaModel, FalconModel) and
gguf-py's constants/tensor_mapping:

* Llama: attn_q / attn_k rows are permuted so that GGUF stores rotary pairs
  interleaved (llama.cpp rope type NORM, pairs (2i, 2i+1)) while HF stores them
  as halves (rotate_half, pairs (i, i + head_dim/2)).  With W of shape
  [n_head * head_dim, n_embd]:
      gguf = W.reshape(n_head, 2, head_dim/2, n_embd).swapaxes(1, 2).reshape(W.shape)
  i.e. gguf row h*head_dim + 2*i + j == hf row h*head_dim + j*head_dim/2 + i.
  attn_k uses n_head_kv instead of n_head.
* Falcon: HF query_key_value holds n_head_kv groups of
  [q * (n_head/n_head_kv), k, v] heads; GGUF attn_qkv holds [all Q, all K, all V]
  (the "jploski" layout).  For the 7B design (multi_query, n_head_kv = 1) the
  two layouts coincide.  Falcon uses NEOX rotary (rotate_half) in both formats.

Tensor names come from gguf.get_tensor_name_map, as in the converter.
"""

from __future__ import annotations

import numpy as np
import gguf

# GGML_TYPE per storage choice: 2-D matrices get `matrix_type`, everything
# else (norm weights/biases) stays F32 like llama.cpp does.
FILE_TYPE = {
    gguf.GGMLQuantizationType.F32: gguf.LlamaFileType.ALL_F32,
    gguf.GGMLQuantizationType.F16: gguf.LlamaFileType.MOSTLY_F16,
    gguf.GGMLQuantizationType.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0,
    gguf.GGMLQuantizationType.Q4_0: gguf.LlamaFileType.MOSTLY_Q4_0,
    gguf.GGMLQuantizationType.Q4_1: gguf.LlamaFileType.MOSTLY_Q4_1,
}


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate_half row order -> GGUF interleaved-pair row order."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of permute_qk."""
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def falcon_qkv_hf_to_gguf(w: np.ndarray, n_head: int, n_head_kv: int, head_dim: int) -> np.ndarray:
    """Per-KV-group [q.., k, v] -> concatenated [Q, K, V] (rows)."""
    n_in = w.shape[1]
    qkv = w.reshape(n_head_kv, n_head // n_head_kv + 2, head_dim, n_in)
    q = qkv[:, :-2].reshape(n_head * head_dim, n_in)
    k = qkv[:, -2].reshape(n_head_kv * head_dim, n_in)
    v = qkv[:, -1].reshape(n_head_kv * head_dim, n_in)
    return np.concatenate([q, k, v], axis=0)


def falcon_qkv_gguf_to_hf(w: np.ndarray, n_head: int, n_head_kv: int, head_dim: int) -> np.ndarray:
    """Inverse of falcon_qkv_hf_to_gguf."""
    n_in = w.shape[1]
    group = n_head // n_head_kv
    q = w[: n_head * head_dim].reshape(n_head_kv, group, head_dim, n_in)
    k = w[n_head * head_dim: (n_head + n_head_kv) * head_dim].reshape(n_head_kv, 1, head_dim, n_in)
    v = w[(n_head + n_head_kv) * head_dim:].reshape(n_head_kv, 1, head_dim, n_in)
    return np.concatenate([q, k, v], axis=1).reshape(w.shape)


def gpt2_byte_tokens() -> list[str]:
    """The 256 GPT-2 byte-level token strings, token id == byte value."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
                 + list(range(ord("\xae"), ord("\xff") + 1)))
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return [mapping[b] for b in range(256)]


def _hf_arch(config) -> str:
    return "llama" if config.model_type == "llama" else "falcon"


def _name_map(config) -> gguf.TensorNameMap:
    arch = gguf.MODEL_ARCH.LLAMA if _hf_arch(config) == "llama" else gguf.MODEL_ARCH.FALCON
    return gguf.get_tensor_name_map(arch, config.num_hidden_layers)


def _rope_params(config) -> dict:
    return dict(getattr(config, "rope_parameters", None) or {})


def _write_metadata(w: gguf.GGUFWriter, config, name: str, matrix_type) -> None:
    arch = _hf_arch(config)
    w.add_name(name)
    w.add_block_count(config.num_hidden_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_head_count(config.num_attention_heads)
    if arch == "llama":
        w.add_feed_forward_length(config.intermediate_size)
        w.add_head_count_kv(config.num_key_value_heads)
        rope = _rope_params(config)
        w.add_rope_freq_base(float(rope["rope_theta"]))
        w.add_layer_norm_rms_eps(config.rms_norm_eps)
        w.add_vocab_size(config.vocab_size)
        w.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
        if rope.get("rope_type") == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(float(rope["factor"]))
    else:
        # FalconModel.set_gguf_parameters: no rope keys (llama.cpp defaults
        # freq_base to 10000). The converter writes feed_forward_length as
        # 4 * hidden (true for real Falcons); we write the actual ffn_hidden_size.
        w.add_tensor_data_layout("jploski")
        w.add_feed_forward_length(config.ffn_hidden_size)
        w.add_head_count_kv(falcon_kv_heads(config))
        w.add_layer_norm_eps(config.layer_norm_epsilon)
    w.add_file_type(FILE_TYPE[matrix_type])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # Minimal byte-level tokenizer so the file is complete: 256 byte tokens,
    # no merges (none can exist: every vocab entry is a single byte).
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(gpt2_byte_tokens())
    w.add_token_types([int(gguf.TokenType.NORMAL)] * 256)
    w.add_bos_token_id(config.bos_token_id)
    w.add_eos_token_id(config.eos_token_id)
    w.add_add_bos_token(False)


def falcon_kv_heads(config) -> int:
    if config.new_decoder_architecture:
        return config.num_kv_heads
    return 1 if config.multi_query else config.num_attention_heads


def hf_to_gguf_tensors(state: dict[str, np.ndarray], config) -> list[tuple[str, np.ndarray]]:
    """HF state dict (float32 numpy) -> [(gguf name, float32 array)], in state-dict order."""
    arch = _hf_arch(config)
    tmap = _name_map(config)
    n_head = config.num_attention_heads
    head_dim = config.hidden_size // n_head
    out = []
    for hf_name, data in state.items():
        if arch == "llama":
            if hf_name.endswith("q_proj.weight"):
                data = permute_qk(data, n_head)
            elif hf_name.endswith("k_proj.weight"):
                data = permute_qk(data, config.num_key_value_heads)
        elif "query_key_value" in hf_name:
            data = falcon_qkv_hf_to_gguf(data, n_head, falcon_kv_heads(config), head_dim)
        name = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError(f"cannot map tensor {hf_name!r}")
        out.append((name, np.ascontiguousarray(data, dtype=np.float32)))
    return out


def write_gguf(path, state: dict[str, np.ndarray], config, name: str, matrix_type) -> None:
    """Write a GGUF with 2-D matrices stored as `matrix_type`, others as F32."""
    arch = _hf_arch(config)
    w = gguf.GGUFWriter(str(path), arch)
    _write_metadata(w, config, name, matrix_type)
    for tname, data in hf_to_gguf_tensors(state, config):
        if data.ndim == 2 and matrix_type == gguf.GGMLQuantizationType.F16:
            w.add_tensor(tname, data.astype(np.float16))
        elif data.ndim == 2 and matrix_type != gguf.GGMLQuantizationType.F32:
            q = gguf.quants.quantize(data, matrix_type)
            w.add_tensor(tname, q, raw_shape=q.shape, raw_dtype=matrix_type)
        else:
            w.add_tensor(tname, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_gguf_tensors(path) -> dict[str, np.ndarray]:
    """All tensors of a GGUF, dequantized to float32, numpy shape [rows, cols]."""
    reader = gguf.GGUFReader(str(path))
    tensors = {}
    for t in reader.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        tensors[t.name] = data.reshape(tuple(int(d) for d in reversed(t.shape.tolist())))
    return tensors


def gguf_to_hf_state(path, config, hf_names: list[str]) -> dict[str, np.ndarray]:
    """HF state dict (for the given HF tensor names) from a GGUF file."""
    arch = _hf_arch(config)
    tmap = _name_map(config)
    by_gguf = read_gguf_tensors(path)
    n_head = config.num_attention_heads
    head_dim = config.hidden_size // n_head
    state = {}
    for hf_name in hf_names:
        gname = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gname not in by_gguf:
            continue  # tied lm_head: absent in the GGUF, tied in HF too
        data = by_gguf[gname]
        if arch == "llama":
            if hf_name.endswith("q_proj.weight"):
                data = unpermute_qk(data, n_head)
            elif hf_name.endswith("k_proj.weight"):
                data = unpermute_qk(data, config.num_key_value_heads)
        elif "query_key_value" in hf_name:
            data = falcon_qkv_gguf_to_hf(data, n_head, falcon_kv_heads(config), head_dim)
        state[hf_name] = data
    return state
