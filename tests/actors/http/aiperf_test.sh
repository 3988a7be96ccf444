#!/usr/bin/env bash
# NVIDIA's AIPerf (a load tool nobody on the team wrote; tools/setup_aiperf.sh installs it in
# .venv/aiperf) profiles the real `actorlm serve` (cpu backend, default model) twice:
#   chat, streamed, two 128-token shared prefixes (AIPerf's prefix-cache workload), 16 requests
#   4 at a time, 8 tokens out with ignore_eos (as vLLM's benchmarks ask);
#   completions, not streamed, 8 requests 2 at a time, 6 tokens out.
# Then reads its per-request export: every request answered without error, exactly the tokens
# asked in usage, and the prompt tokens the prefix cache served (usage.prompt_tokens_details)
# reported for most of the shared-prefix requests.
# Usage: aiperf_test.sh ACTORLM VENV TOKENIZER_DIR. Exit 77 (skipped) without VENV.
set -euo pipefail
actorlm="$1" venv="$2" tokenizer="$3"
source "$(dirname "$0")/serve_for_test.sh"
skip_without "$venv/bin/aiperf" "AIPerf (about 1.2 GB)" tools/setup_aiperf.sh
start_server "$actorlm"

# The tokenizer is a local folder, so nothing is fetched (HF_HUB_OFFLINE=1 would make AIPerf
# 0.13 take the folder for a hub repo id and fail).
export AIPERF_UI_TYPE=simple
profile() {  # NAME ARGS...
  local name=$1
  shift
  timeout --kill-after=10 240 "$venv/bin/aiperf" profile --model SmolLM2-135M-Instruct --url "$url" --tokenizer "$tokenizer" \
    --ui-type simple --artifact-dir "$work/$name" "$@" > "$work/$name.log" 2>&1 ||
    { local rc=$?; tail -n 30 "$work/$name.log" >&2; fail "aiperf ($name) exited $rc"; }
}
profile chat --endpoint-type chat --streaming --concurrency 4 --request-count 16 \
  --synthetic-input-tokens-mean 32 --output-tokens-mean 8 --num-prefix-prompts 2 --prefix-prompt-length 128 \
  --extra-inputs ignore_eos:true
profile completions --endpoint-type completions --concurrency 2 --request-count 8 \
  --synthetic-input-tokens-mean 24 --output-tokens-mean 6 --extra-inputs ignore_eos:true

python3 - "$work" <<'PY' || fail "see above"
import json, sys
work = sys.argv[1]
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        ok = False
for name, count, out_tokens in (("chat", 16, 8), ("completions", 8, 6)):
    summary = json.load(open(f"{work}/{name}/profile_export_aiperf.json"))
    check(summary["error_summary"] == [], f"{name}: errors {summary['error_summary']}")
    check(summary["completed_request_count"]["avg"] == count, f"{name}: {summary['completed_request_count']} completed")
    records = [json.loads(line) for line in open(f"{work}/{name}/profile_export.jsonl")]
    check(len(records) == count, f"{name}: {len(records)} records")
    for r in records:
        m = r["metrics"]
        check("error" not in r or not r["error"], f"{name}: a request failed: {r.get('error')}")
        check(m.get("usage_completion_tokens", {}).get("value") == out_tokens,
              f"{name}: usage.completion_tokens {m.get('usage_completion_tokens')}, not {out_tokens}")
    if name == "chat":
        cached = [r["metrics"].get("usage_prompt_cache_read_tokens", {}).get("value", 0) for r in records]
        prompt = records[0]["metrics"]["usage_prompt_tokens"]["value"]
        hits = sum(c > 0 for c in cached)
        print(f"chat: prompt {prompt} tokens; prompt tokens from the prefix cache per request: {cached}")
        # The first requests of each prefix, sent 4 at once, may all miss; the later ones hit.
        check(hits >= count // 2, f"only {hits} of {count} requests report prefix-cache hits")
        check(all(c % 16 == 0 and c < prompt for c in cached), "cached counts not whole blocks below the prompt")
sys.exit(0 if ok else 1)
PY
echo "aiperf: ok"
