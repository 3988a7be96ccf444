#!/usr/bin/env bash
# `actorlm generate` on the default model: the greedy answer to the default prompt, and clear
# errors (exit 1, the problem named) for a missing model, a corrupt one and an impossible request.
set -euo pipefail
actorlm="$1"
model="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(timeout 300 "$actorlm" generate --model "$model" 2>"$tmp/err") || fail "generate exited $?: $(cat "$tmp/err")"
[[ $out == "The capital of France is Paris." ]] || fail "unexpected answer: '$out'"

if "$actorlm" generate --model "$tmp/none.gguf" >/dev/null 2>"$tmp/err"; then fail "a missing model succeeded"; fi
grep -q "none.gguf" "$tmp/err" || fail "missing model not named: $(cat "$tmp/err")"

head -c 100000 "$model" >"$tmp/truncated.gguf"
if "$actorlm" generate --model "$tmp/truncated.gguf" >/dev/null 2>"$tmp/err"; then fail "a truncated model succeeded"; fi
grep -q "truncated.gguf" "$tmp/err" || fail "truncated model not named: $(cat "$tmp/err")"

if "$actorlm" generate --model "$model" -n 5000 >/dev/null 2>"$tmp/err"; then fail "an over-long request succeeded"; fi
grep -q "max_model_len" "$tmp/err" || fail "over-long request: $(cat "$tmp/err")"
echo "generate cli: ok"
