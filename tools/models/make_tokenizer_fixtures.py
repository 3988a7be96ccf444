#!/usr/bin/env python3
"""Golden fixtures for the C++ tokenizer (tests/model/tokenizer/), made with an independent
implementation: Hugging Face `tokenizers` (Rust, Oniguruma regexes).

Rerun (from the repository root, after tools/models/fetch_default_model.sh):
    python3 -m venv /work/venv-tok
    /work/venv-tok/bin/pip install tokenizers gguf numpy transformers jinja2
    /work/venv-tok/bin/python tools/models/make_tokenizer_fixtures.py

Reads the default model's vocabulary, merges and token types with the `gguf` package, builds a
`tokenizers` Tokenizer equivalent to SmolLM2's tokenizer.json (BPE; pre-tokenizer
Sequence[Digits(individual_digits), ByteLevel(use_regex)]; ByteLevel decoder; the control tokens
as special added tokens) and writes into tests/model/tokenizer/fixtures/:
  tokenizer_goldens.json   texts and their ids: for each pre-tokenizer type (the same vocabulary
                           split the way `gpt2`, `smollm`, `llama-bpe`, `falcon` split), with
                           special tokens parsed and not; the pre-tokenizer pieces; random token
                           sequences with their bytes decoded the way Python's 'replace' does;
                           chat prompts rendered by Jinja (transformers' apply_chat_template).
  smollm2/tokenizer.json   the constructed tokenizer, serialized (tokenizer.json format), and
  smollm2/tokenizer_config.json  the special tokens and chat template, as HF writes beside it
                           (SmolLM2-135M-Instruct's: bos <|im_start|>, eos and pad <|im_end|>,
                           unk <|endoftext|>).
As a cross-check the script also builds the tokenizer the way `transformers` loads a GGUF (its
gguf_tokenizer_mapping, fed by the `gguf` package since transformers' own GGUF reader needs
torch) and requires the same ids on every text without numeric characters (transformers has no
split for pre "smollm"), and renders SmolLM2's chat template with its apply_chat_template.
"""

import json
import os
import random
import sys
import unicodedata

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GGUF_PATH = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT_DIR = os.path.join(ROOT, "tests", "model", "tokenizer", "fixtures")

# GPT-2's split (tokenizers' ByteLevel use_regex) and Llama 3's (its tokenizer.json Split).
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TEXTS = [
    "",
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "trailing space ",
    "trailing spaces   ",
    "   ",
    " ",
    "a  b   c    d",
    "tab\tseparated\tvalues",
    "\t\tindented with tabs",
    "line one\nline two\n\nline four\n",
    "\n\n\n",
    "windows\r\nline\r\nends",
    "mixed \t\n whitespace \n\t run",
    "1234567",
    "3.14159",
    "1,000,000",
    "The year 2024 had 366 days.",
    " 42",
    "x1y22z333w4444",
    "don't",
    "I'LL",
    "we've",
    "She's, they're, I'd, you'll, I'm",
    "DON'T SHOUT'S",
    "rock 'n' roll",
    "!!!???...",
    "(a+b)*c=d; e<f>g",
    "--- === *** ###",
    "email@example.com https://example.com/path?q=1&r=2#frag",
    "\u00ff\u0100",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9",
    "cafe\u0301 (combining acute)",
    "a\u0308o\u0308u\u0308",
    "\U0001F600 \U0001F389\U0001F38A",
    "family: \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466",
    "flags: \U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5",
    "thumbs \U0001F44D\U0001F3FD up",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "mixed: English \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0440\u0443\u0441\u0441\u043a\u0438\u0439 123",
    "full\u3000width\u3000space and nbsp\u00a0here",
    "zero\u200bwidth\u200cjoiner\u200d",
    "digits \u0661\u0662\u0663 \u0967\u0968\u0969 \u2167 \u00bd",
    "price: 12,345.67 or 12\u00bd3456, x\u00b2y",
    "a  12 and  999",
    "\u043c and \u043c\u0438\u0440 999",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "    if (x) {\n        y();\n    }",
    "<div class=\"x\">&amp;</div>",
    "SELECT * FROM t WHERE id = 7;",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more text",
    "<|im_start|><|im_end|><|endoftext|>",
    "<|im_start",
    "<|im_start|",
    "<|im_end|>>",
    "<<|im_start|>>",
    "<repo_name>actorlm<file_sep>main.cpp",
    "a<|endoftext|>",
    "\x00\x01\x02 control \x7f chars",
    "\u0085next line\u2028line sep\u2029para sep",
    "\u180e mongolian vowel separator",
    "bytes with no token: \x04\x06\x13 and plane 4 \U00040000 ok",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "         many spaces before",
    "The quick brown fox jumps over the lazy dog. " * 3,
]

CONVERSATIONS = {
    "with_system": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
    ],
    "without_system": [
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke about 2 + 2 = 4.\nKeep it short."},
    ],
    "with_tool": [
        {"role": "user", "content": "  Weather in Paris?  "},
        {"role": "assistant", "content": "{\"call\": \"weather\", \"city\": \"Paris\"}"},
        {"role": "tool", "content": "\t18 C, sunny\n"},
    ],
}

# Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template (bos_token <|begin_of_text|>).
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
# Falcon chat: the format of tiiuae/falcon-180B-chat's model card ("System: ...\nUser: ...\n
# Falcon: ..."), written as a template; the generation prompt is "\nFalcon:"; other roles
# are written capitalised.
FALCON_TEMPLATE = (
    "{% for message in messages %}{% if not loop.first %}{{ '\n' }}{% endif %}"
    "{% if message['role'] == 'system' %}{{ 'System: ' }}{% elif message['role'] == 'user' %}"
    "{{ 'User: ' }}{% elif message['role'] == 'assistant' %}{{ 'Falcon: ' }}"
    "{% else %}{{ message['role'][0] | upper + message['role'][1:] + ': ' }}{% endif %}"
    "{{ message['content'] }}{% endfor %}{% if add_generation_prompt %}{{ '\n' + 'Falcon:' }}{% endif %}"
)


def bytes_to_unicode():
    """GPT-2's byte -> printable code point table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def read_gguf(path):
    reader = gguf.GGUFReader(path)
    field = lambda key: reader.fields[key].contents() if key in reader.fields else None
    return {
        "tokens": field("tokenizer.ggml.tokens"),
        "merges": field("tokenizer.ggml.merges"),
        "token_type": field("tokenizer.ggml.token_type"),
        "pre": field("tokenizer.ggml.pre"),
        "chat_template": field("tokenizer.chat_template"),
        "bos": field("tokenizer.ggml.bos_token_id"),
        "eos": field("tokenizer.ggml.eos_token_id"),
        "pad": field("tokenizer.ggml.padding_token_id"),
        "unk": field("tokenizer.ggml.unknown_token_id"),
    }


def pre_tokenizer_for(pre):
    if pre == "gpt2":
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    if pre == "llama-bpe":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if pre == "falcon":  # tiiuae/falcon-7b tokenizer.json
        return pre_tokenizers.Sequence([
            pre_tokenizers.Punctuation(behavior="contiguous"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.Split(Regex(r"[0-9][0-9][0-9]"), behavior="isolated")])
    raise ValueError(pre)


def build_tokenizer(meta, pre):
    vocab = {tok: i for i, tok in enumerate(meta["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in meta["merges"]]
    # Llama 3's tokenizer.json sets ignore_merges; llama.cpp does the same for llama-bpe.
    model = models.BPE(vocab=vocab, merges=merges, ignore_merges=(pre == "llama-bpe"))
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizer_for(pre)
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False)
                for t, ty in zip(meta["tokens"], meta["token_type"]) if ty == 3]
    tok.add_special_tokens(specials)
    return tok


def encode(tok, text, parse_special):
    tok.encode_special_tokens = not parse_special
    ids = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    return ids


def pieces(pre, text):
    """The pre-tokenizer's pieces, in the byte-level spelling ByteLevel gives them (a falcon
    piece may hold part of a UTF-8 character)."""
    return [piece for piece, _ in pre_tokenizer_for(pre).pre_tokenize_str(text)]


def transformers_cross_check(meta, texts, smollm):
    """transformers' own GGUF -> tokenizers conversion must give the same ids, except on texts
    with numeric characters: it has no split for pre "smollm" and so keeps digit runs together
    (ASCII runs still end as single digits: the vocabulary has no multi-digit tokens)."""
    try:
        from transformers.integrations.gguf.gguf_tokenizer_mapping import (
            add_gguf_special_tokens, byte_level_tokenizer)
    except ImportError as e:
        print(f"transformers cross-check skipped: {e}", file=sys.stderr)
        return None
    d = {"tokenizer_type": "gpt2", "pre_tokenizer_type": meta["pre"], "tokens": meta["tokens"],
         "merges": meta["merges"], "token_type": meta["token_type"]}
    hf = add_gguf_special_tokens(byte_level_tokenizer(d), d)
    hf.chat_template = meta["chat_template"]
    compared = 0
    for text in texts:
        if any(unicodedata.category(c).startswith("N") for c in text):
            continue
        compared += 1
        theirs = hf.encode(text, add_special_tokens=False)
        ours = encode(smollm, text, True)
        if theirs != ours:
            raise SystemExit(f"transformers disagrees on {text!r}: {theirs} vs {ours}")
    print(f"transformers cross-check: {compared} texts without digits agree")
    return hf


def chat_goldens(meta, hf):
    from jinja2 import Environment
    env = Environment(trim_blocks=True, lstrip_blocks=True)  # as transformers renders templates
    templates = {"chatml": meta["chat_template"], "llama3": LLAMA3_TEMPLATE, "falcon": FALCON_TEMPLATE}
    out = []
    for fmt, source in templates.items():
        for name, messages in CONVERSATIONS.items():
            for gen in (False, True):
                text = env.from_string(source).render(messages=messages, add_generation_prompt=gen,
                                                      bos_token="<|begin_of_text|>")
                entry = {"format": fmt, "conversation": name, "add_generation_prompt": gen,
                         "text": text}
                if fmt == "chatml" and hf is not None:
                    via = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
                    if via != text:
                        raise SystemExit(f"apply_chat_template disagrees on {name}")
                    entry["source"] = "transformers apply_chat_template (SmolLM2 GGUF template)"
                out.append(entry)
    return out


def token_bytes(meta, ids):
    """The raw bytes of `ids`: control tokens are their text, others unspelled byte by byte."""
    back = {c: b for b, c in bytes_to_unicode().items()}
    raw = b""
    for i in ids:
        t = meta["tokens"][i]
        raw += t.encode("utf-8") if meta["token_type"][i] == 3 else bytes(back[c] for c in t)
    return raw


def random_sequences(meta, count, seed=1234):
    """Random token ids (mostly multi-byte pieces) and their bytes as Python decodes them with
    errors='replace' (one U+FFFD per maximal invalid subpart)."""
    back = {c: b for b, c in bytes_to_unicode().items()}
    rng = random.Random(seed)
    n = len(meta["tokens"])
    multibyte = [i for i, t in enumerate(meta["tokens"])
                 if meta["token_type"][i] == 1 and any(back.get(c, 0) >= 0x80 for c in t)]
    out = []
    for _ in range(count):
        ids = [rng.choice(multibyte) if rng.random() < 0.7 else rng.randrange(n)
               for _ in range(rng.randrange(1, 12))]
        out.append({"ids": ids, "text": token_bytes(meta, ids).decode("utf-8", errors="replace")})
    return out


def main():
    meta = read_gguf(GGUF_PATH)
    assert meta["pre"] == "smollm", meta["pre"]
    os.makedirs(OUT_DIR, exist_ok=True)
    tokenizers_by_pre = {pre: build_tokenizer(meta, pre)
                         for pre in ("smollm", "gpt2", "llama-bpe", "falcon")}
    smollm = tokenizers_by_pre["smollm"]
    hf = transformers_cross_check(meta, TEXTS, smollm)

    cases = []
    for text in TEXTS:
        ids = encode(smollm, text, True)
        case = {"text": text,
                # the ids' raw bytes (hex): the text again, less any byte the vocabulary has
                # no token for (dropped)
                "decoded_hex": token_bytes(meta, ids).hex(),
                "ids": ids,
                "ids_plain": encode(smollm, text, False),
                "ids_by_pre": {pre: encode(t, text, True) for pre, t in tokenizers_by_pre.items()},
                "pieces_by_pre": {pre: pieces(pre, text) for pre in tokenizers_by_pre}}
        if case["decoded_hex"] != text.encode("utf-8").hex():
            assert "no token" in text, text  # only the case made for it loses bytes
        cases.append(case)

    goldens = {
        "generator": "tools/models/make_tokenizer_fixtures.py (HF tokenizers "
                     f"{__import__('tokenizers').__version__})",
        "model": os.path.basename(GGUF_PATH),
        "cases": cases,
        "random_sequences": random_sequences(meta, 200),
        "chat": chat_goldens(meta, hf),
        "default_system": "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
    }
    with open(os.path.join(OUT_DIR, "tokenizer_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=True, indent=1)

    os.makedirs(os.path.join(OUT_DIR, "smollm2"), exist_ok=True)
    path = os.path.join(OUT_DIR, "smollm2", "tokenizer.json")
    smollm.save(path, pretty=False)
    size = os.path.getsize(path)
    if size > 3 * 1024 * 1024:
        raise SystemExit(f"{path} is {size} bytes: too large to commit")
    config = {"bos_token": meta["tokens"][meta["bos"]], "eos_token": meta["tokens"][meta["eos"]],
              "pad_token": meta["tokens"][meta["pad"]], "unk_token": meta["tokens"][meta["unk"]],
              "add_bos_token": False, "chat_template": meta["chat_template"]}
    with open(os.path.join(OUT_DIR, "smollm2", "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=True, indent=1)
    print(f"wrote {len(cases)} cases; tokenizer.json {size} bytes")


if __name__ == "__main__":
    main()
