#!/usr/bin/env python3
"""Writes the golden files of tests/model/format/ with the independent `gguf` Python package
(ggml's reference quantizers and dequantizers in numpy) and a hand-written safetensors encoder:

  fixtures/dequant.json        per dtype, blocks of raw bytes (hex) and the float32 values
                               gguf.quants.dequantize gives for them (hex of little-endian f32)
  fixtures/reference.gguf      written by gguf.GGUFWriter: one metadata key per GGUF value type
                               (plus arrays, nested arrays) and one tensor per supported dtype,
                               whose bytes are the first case of each dtype in dequant.json
  corpus/gguf/seed_*.gguf      small valid files, seeds of the mutation test and libFuzzer
  corpus/safetensors/seed_*.safetensors

Deterministic (fixed seeds). Run with the reference venv:
  /work/venv-ref/bin/python tools/models/make_dequant_fixture.py
"""
import importlib.metadata
import json
import struct
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

ROOT = Path(__file__).resolve().parents[2] / "tests" / "model" / "format"
FIXTURES = ROOT / "fixtures"
CORPUS = ROOT / "corpus"

# f16 bit patterns worth a block scale each: zero, -0, 1, -2, the smallest and largest
# subnormals, the smallest normal, the largest finite, +-inf and a nan.
SPECIAL_F16 = [0x0000, 0x8000, 0x3C00, 0xC000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00,
               0x7E00]


def f32_hex(values: np.ndarray) -> str:
    return np.ascontiguousarray(values, dtype="<f4").tobytes().hex()


def case(name: str, raw: bytes, qtype: Q) -> dict:
    buf = np.frombuffer(raw, dtype=np.uint8)
    with np.errstate(all="ignore"):  # inf * 0 and nan scales are cases, not accidents
        values = dequantize(buf, qtype).reshape(-1)
    return {"name": name, "bytes": raw.hex(), "expected": f32_hex(values)}


def block_cases(qtype: Q, rng: np.random.Generator) -> list[dict]:
    block_bytes = {Q.Q8_0: 34, Q.Q4_0: 18, Q.Q4_1: 20}[qtype]
    head = 4 if qtype == Q.Q4_1 else 2  # f16 scale (and f16 min)
    out = []
    # Round trips of real-looking rows through the reference quantizer.
    for name, scale in (("quantized_normal", 1.0), ("quantized_large", 3000.0),
                        ("quantized_tiny", 1e-6)):
        x = (rng.standard_normal(96) * scale).astype(np.float32).reshape(1, 96)
        out.append(case(name, quantize(x, qtype).tobytes(), qtype))
    x = np.zeros((1, 32), dtype=np.float32)
    out.append(case("quantized_zeros", quantize(x, qtype).tobytes(), qtype))
    # Every code value with each special scale (and min), random codes otherwise.
    for i, d in enumerate(SPECIAL_F16):
        raw = bytearray(rng.integers(0, 256, block_bytes, dtype=np.uint8).tobytes())
        raw[0:2] = struct.pack("<H", d)
        if qtype == Q.Q4_1:
            raw[2:4] = struct.pack("<H", SPECIAL_F16[(i + 3) % len(SPECIAL_F16)])
        out.append(case(f"raw_scale_{d:04x}", bytes(raw), qtype))
    codes = bytes(range(256))[: block_bytes - head] if qtype != Q.Q8_0 else bytes(
        (np.arange(32) * 8 - 128).astype(np.int8).tobytes())
    out.append(case("raw_all_codes", struct.pack("<H", 0x3555) +
                    (struct.pack("<H", 0xB800) if qtype == Q.Q4_1 else b"") + codes, qtype))
    return out


def f16_cases(rng: np.random.Generator) -> list[dict]:
    every = np.arange(0, 65536, 32, dtype=np.uint16)
    odd = rng.integers(0, 65536, 1024, dtype=np.uint16)
    special = np.array(SPECIAL_F16 + [0x83FF, 0x8001, 0xFBFF, 0x7C01, 0xFE00, 0x7FFF],
                       dtype=np.uint16)
    cases = []
    for name, bits in (("special", special), ("every_32nd", every), ("random", odd)):
        cases.append(case(name, bits.astype("<u2").tobytes(), Q.F16))
    return cases


def bf16_cases(rng: np.random.Generator) -> list[dict]:
    special = np.array([0x0000, 0x8000, 0x3F80, 0xC000, 0x0001, 0x007F, 0x0080, 0x7F7F, 0x7F80,
                        0xFF80, 0x7FC0, 0x7F81], dtype=np.uint16)
    rand = rng.integers(0, 65536, 1024, dtype=np.uint16)
    return [case("special", special.astype("<u2").tobytes(), Q.BF16),
            case("random", rand.astype("<u2").tobytes(), Q.BF16)]


def f32_cases(rng: np.random.Generator) -> list[dict]:
    x = np.concatenate([rng.standard_normal(29).astype(np.float32),
                        np.array([np.inf, -np.inf, 1e-45], dtype=np.float32)])
    return [case("values", x.astype("<f4").tobytes(), Q.F32)]


def write_reference_gguf(path: Path, cases: dict) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo w\u00f6rld")
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62))
    w.add_float64("test.f64", 3.141592653589793)
    w.add_array("test.array.str", ["a", "", "\u00df\u00e7"])
    w.add_key_value("test.array.i32", [1, -2, 3], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.INT32)
    w.add_key_value("test.array.f32", [0.5, -1.25], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.FLOAT32)
    w.add_key_value("test.array.nested", [[1, 2], [3]], gguf.GGUFValueType.ARRAY)
    # t.<dtype>: the named case of dequant.json, as `rows` rows.
    for dtype, qtype, case_name, rows in (
            ("f32", Q.F32, "values", 2), ("f16", Q.F16, "random", 2),
            ("bf16", Q.BF16, "random", 2), ("q8_0", Q.Q8_0, "quantized_normal", 1),
            ("q4_0", Q.Q4_0, "quantized_normal", 1), ("q4_1", Q.Q4_1, "quantized_normal", 1)):
        raw = bytes.fromhex(next(c for c in cases[dtype] if c["name"] == case_name)["bytes"])
        w.add_tensor(f"t.{dtype}", np.frombuffer(raw, dtype=np.uint8).reshape(rows, -1),
                     raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_safetensors(path: Path, tensors: list[tuple[str, str, list[int], bytes]],
                      metadata: dict | None = None) -> None:
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the safetensors package pads the header to 8 bytes
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main() -> None:
    rng = np.random.default_rng(20240601)
    cases = {"f32": f32_cases(rng), "f16": f16_cases(rng), "bf16": bf16_cases(rng),
             "q8_0": block_cases(Q.Q8_0, rng), "q4_0": block_cases(Q.Q4_0, rng),
             "q4_1": block_cases(Q.Q4_1, rng)}
    FIXTURES.mkdir(parents=True, exist_ok=True)
    doc = {"generator": "tools/models/make_dequant_fixture.py",
           "gguf_version": importlib.metadata.version("gguf"), "cases": cases}
    (FIXTURES / "dequant.json").write_text(json.dumps(doc, indent=1) + "\n")
    write_reference_gguf(FIXTURES / "reference.gguf", cases)

    (CORPUS / "gguf").mkdir(parents=True, exist_ok=True)
    (CORPUS / "safetensors").mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(CORPUS / "gguf" / "seed_small.gguf"), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_array("tokenizer.ggml.tokens", ["a", "b"])
    w.add_tensor("w.q8", np.frombuffer(bytes.fromhex(cases["q8_0"][0]["bytes"])[:68],
                                       dtype=np.uint8).reshape(2, 34), raw_dtype=Q.Q8_0)
    w.add_tensor("w.q41", np.frombuffer(bytes.fromhex(cases["q4_1"][0]["bytes"])[:40],
                                        dtype=np.uint8).reshape(1, 40), raw_dtype=Q.Q4_1)
    w.add_tensor("norm", np.arange(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    w = gguf.GGUFWriter(str(CORPUS / "gguf" / "seed_aligned_64.gguf"), "llama")
    w.data_alignment = 64
    w.add_custom_alignment(64)
    w.add_tensor("h", np.arange(6, dtype=np.float16).reshape(2, 3))
    w.add_tensor("b", np.frombuffer(bytes.fromhex(cases["bf16"][0]["bytes"])[:8],
                                    dtype=np.uint8).reshape(1, 8), raw_dtype=Q.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    write_safetensors(CORPUS / "safetensors" / "seed_three_dtypes.safetensors", [
        ("a.f32", "F32", [2, 2], np.arange(4, dtype="<f4").tobytes()),
        ("b.f16", "F16", [3], np.array([1, -2, 0.5], dtype="<f2").tobytes()),
        ("c.bf16", "BF16", [2, 1], bytes.fromhex("803f00c0")),
    ], metadata={"format": "pt"})
    write_safetensors(CORPUS / "safetensors" / "seed_empty_tensor.safetensors", [
        ("z", "F32", [0, 4], b""), ("one", "F32", [], np.float32(7).tobytes()),
    ])


if __name__ == "__main__":
    main()
