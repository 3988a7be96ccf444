#!/usr/bin/env bash
# check.sh's end-to-end part on a GPU: `actorlm serve` with engine.backend = "cuda" on a 1.2 B
# Llama-shaped model with random weights (tools/gpu/make_llama_1b.py), driven by `actorlm bench
# client` (closed loop, 128-token prompts, exactly 128 new tokens) at 1, 64 and 256 concurrent
# requests, then with engine.cuda_graphs at 64 and 256; HF transformers generate() on the same
# weights beside it; and, where the machine has
# the `openai` package and the default model ($ACTORLM_MODELS_DIR), the official client's test
# against the cuda backend.
#
#   tools/gpu/e2e.sh ACTORLM RUN_PROG_LIBS OUT_DIR     (check.sh calls it; exit 0 when it ran)
# Writes OUT_DIR/e2e.json: {"serve_output_tokens_per_s": {concurrency: tokens/s},
# "serve_host_side_share": {concurrency: share of the steps' wall time spent on the host: the
# engine's planning and reservation, the shard's preparing and launching},
# "serve_graphs_output_tokens_per_s" and "serve_graphs_host_side_share" (the same with CUDA
# graphs), "hf_same_weights": {...}, "openai_test": ...}.
set -uo pipefail
actorlm=$1 libs=$2 out=$3
log="$out/gpu-check.log"
model=${ACTORLM_GPU_MODEL_DIR:-/tmp/actorlm-llama-1b}
run() { LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

echo "== e2e: model" >>"$log"
if [[ ! -f $model/config.json ]]; then
  if ! timeout 300 python3 tools/gpu/make_llama_1b.py "$model" >>"$log" 2>&1; then
    echo "e2e: no model (see the log: torch and transformers are needed to make it)"
    printf '{"skipped": "no model: tools/gpu/make_llama_1b.py failed (torch and transformers needed)"}\n' >"$out/e2e.json"
    exit 1
  fi
fi
# One serve's run: its config (with any extra [engine] keys), levels of concurrency and requests
# per level (a multiple of the level); sets serve_json and share_json.
serve_json="{}" share_json="{}"
serve_run() {
  local name=$1 engine_extra=$2 levels=$3 per=$4
  cat >"$out/serve-$name.toml" <<TOML
[engine]
backend = "cuda"
$engine_extra
[model]
name = "llama-1b-random"
path = "$model"
max_model_len = 4096
[scheduler]
max_num_seqs = 256
max_num_batched_tokens = 8192
TOML
  serve_json="{}" share_json="{}"
  run "$actorlm" serve --config "$out/serve-$name.toml" --port 0 >"$out/serve-$name.log" 2>&1 &
  local pid=$! url=""
  for _ in $(seq 1 240); do
    url=$(grep -o "http://127.0.0.1:[0-9]*" "$out/serve-$name.log" | head -1)
    [[ -n $url ]] && break
    kill -0 $pid 2>/dev/null || break
    sleep 1
  done
  if [[ -z $url ]]; then
    echo "e2e ($name): actorlm serve did not start on the GPU:"; tail -n 20 "$out/serve-$name.log"
  else
    echo "e2e ($name): serving at $url"
    local points="" shares="" c n before line tps share
    for c in $levels; do
      n=$(( c == 1 ? 4 : per * c ))
      before=$(step_seconds "$url")
      line=$(run timeout 300 "$actorlm" bench client "$url" --tokenizer "$model/tokenizer.json" --requests $n \
               --input 128 --output 128 --concurrency $c --json 2>>"$log" | tail -1)
      tps=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1])["runs"][0]["summary"]; print(round(r["output_tokens_per_s"],1) if r["failed"]==0 else "null")' "$line" 2>/dev/null || echo null)
      share=$(host_share "$before" "$(step_seconds "$url")")
      echo "e2e ($name): $c concurrent: $tps output tokens/s; host-side share of the steps' time $share"
      points+="${points:+, }\"$c\": $tps"
      shares+="${shares:+, }\"$c\": $share"
    done
    serve_json="{$points}" share_json="{$shares}"
  fi
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  tail -n 30 "$out/serve-$name.log" >>"$log"
}

# The engine's step counters from /metrics: wall, shards' part, rank 0's host work within it.
step_seconds() {
  python3 -c '
import sys, urllib.request
v = {}
for line in urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=10).read().decode().splitlines():
    parts = line.split()
    if len(parts) == 2 and not line.startswith("#"):
        v[parts[0]] = float(parts[1])
print(v["actorlm_engine_step_seconds_total"], v["actorlm_shard_step_seconds_total"], v["actorlm_shard_host_seconds_total"])
' "$1" 2>>"$log" || echo "null"
}
# The host-side share of the steps between two readings: (wall - shards + shard host) / wall,
# the engine's planning and reservation plus the shard's preparing and launching.
host_share() {
  python3 -c '
import sys
a, b = [list(map(float, x.split())) for x in sys.argv[1:3]]
wall, shard, host = (b[i] - a[i] for i in range(3))
print(round((wall - shard + host) / wall, 4) if wall > 0 else "null")
' "$1" "$2" 2>/dev/null || echo null
}

# Launch by launch at 1, 64 and 256; then with engine.cuda_graphs (decode steps replayed as CUDA
# graphs; never run on a GPU before this script) at 64 and 256, as many requests.
serve_run eager "" "1 64 256" 2
eager_json=$serve_json eager_share=$share_json
serve_run graphs "cuda_graphs = true" "64 256" 2
graphs_json=$serve_json graphs_share=$share_json

echo "== e2e: HF generate() on the same weights" >>"$log"
PYTHONUNBUFFERED=1 timeout 300 python3 tools/gpu/hf_generate_baseline.py --model "$model" --json "$out/hf_same_weights.json" \
  2>&1 | tail -n 5 | tee -a "$log"
hf=$( [[ -s $out/hf_same_weights.json ]] && cat "$out/hf_same_weights.json" || echo null)

openai_test='"skipped: no openai package or no default model here"'
if python3 -c "import openai, prometheus_client" 2>/dev/null && [[ -f ${ACTORLM_MODELS_DIR:-/nonexistent}/SmolLM2-135M-Instruct.Q4_1.gguf ]]; then
  printf '[engine]\nbackend = "cuda"\n[model]\npath = "%s"\n' "$ACTORLM_MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" >"$out/openai-cuda.toml"
  if LD_LIBRARY_PATH="$libs" timeout 300 python3 tests/actors/http/openai_client_test.py "$actorlm" "$out/openai-cuda.toml" >>"$log" 2>&1; then
    openai_test='"passed"'
  else
    openai_test='"failed"'
  fi
fi
echo "e2e: openai client test: $openai_test"
printf '{"serve_output_tokens_per_s": %s, "serve_host_side_share": %s, "serve_graphs_output_tokens_per_s": %s, "serve_graphs_host_side_share": %s, "hf_same_weights": %s, "openai_test": %s}\n' \
  "$eager_json" "$eager_share" "$graphs_json" "$graphs_share" "$hf" "$openai_test" >"$out/e2e.json"
