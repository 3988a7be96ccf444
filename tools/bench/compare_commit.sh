#!/usr/bin/env bash
# Measures a benchmark of this checkout against an earlier commit on the same machine: builds
# that commit's actorlm (a git worktree under ${TMPDIR:-/tmp}, CUDA off, ccache), then runs the
# two binaries alternately, ROUNDS times per measurement, so that a ratio compares runs close in
# time on a shared machine. Prints one JSON line per run and the medians.
#
# Usage: tools/bench/compare_commit.sh COMMIT [ROUNDS] [cpu|engine]
#   cpu (default): bench cpu at one stream, 32 requests, and 64 concurrent, 64 requests, on the
#     default model (models/, tools/setup.sh fetches it).
#   engine: bench scheduler (the engine's per-step overhead) and bench sim (the simulator's
#     speed, one thread; a plan of 20 requests per configuration, which is not compared).
# Examples: issue 15's baseline (the tree before the weights were kept in their file type),
#   tools/bench/compare_commit.sh 7759a87 2
# and issue 11's (the engine before the step-path work):
#   tools/bench/compare_commit.sh 04b7e96 9 engine
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: tools/bench/compare_commit.sh COMMIT [ROUNDS] [cpu|engine]"
commit=${1:?$usage}
rounds=${2:-2}
bench=${3:-cpu}
sha=$(git rev-parse --short "$commit^{commit}")
model="$PWD/models/SmolLM2-135M-Instruct.Q4_1.gguf"
case "$bench" in
  cpu)
    [[ -f "$model" ]] || { echo "compare_commit: $model missing (run: bash tools/setup.sh)" >&2; exit 2; }
    model_flag=(--model "$model")
    measurements=("cpu --concurrency 1 --requests 32 --no-baseline"
                  "cpu --concurrency 64 --requests 64 --no-baseline")
    keys="tokens_per_s_1 tokens_per_s_64" ;;
  engine)
    model_flag=()
    measurements=("scheduler" "sim --plan-requests 20 --jobs 1")
    keys="step_overhead_us_256 step_overhead_us_1024 policy_step_us_256 policy_step_us_1024"
    keys+=" sim_requests_per_s sim_requests_per_s_records sim_requests_per_s_all_ranks" ;;
  *) echo "compare_commit: unknown benchmark '$bench' ($usage)" >&2; exit 2 ;;
esac
[[ -x build/tools/actorlm ]] || { echo "compare_commit: build/tools/actorlm missing (run: bash tools/build.sh)" >&2; exit 2; }

tree="${TMPDIR:-/tmp}/actorlm-compare-$sha"
if [[ ! -d "$tree" ]]; then
  echo "compare_commit: checking out $sha in $tree" >&2
  git worktree add --detach "$tree" "$sha" >&2
fi
echo "compare_commit: building $sha's actorlm (the first time takes a while on 2 cores)" >&2
export CCACHE_BASEDIR="$tree" CCACHE_NOHASHDIR=1
cmake -S "$tree" -B "$tree/build" -G Ninja -DACTORLM_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$tree/build" -j"$(( $(nproc) < 2 ? 1 : 2 ))" --target actorlm >&2

old="$tree/build/tools/actorlm"
new="$PWD/build/tools/actorlm"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for m in "${measurements[@]}"; do
    for side in old new; do
      bin=$old; [[ $side == new ]] && bin=$new
      echo "compare_commit: round $r, $side ($([[ $side == old ]] && echo "$sha" || echo this tree)), bench $m" >&2
      # shellcheck disable=SC2086  # $m is a benchmark and its flags
      line=$("$bin" bench $m "${model_flag[@]}" 2>/dev/null | tail -n 1)
      echo "{\"side\":\"$side\",\"round\":$r,\"result\":$line}" | tee -a "$out"
    done
  done
done

python3 - "$out" "$sha" $keys <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for key in sys.argv[3:]:
    old = [r["result"][key] for r in runs if r["side"] == "old" and key in r["result"]]
    new = [r["result"][key] for r in runs if r["side"] == "new" and key in r["result"]]
    if old and new:
        mo, mn = statistics.median(old), statistics.median(new)
        print(f"{key}: {sys.argv[2]} median {mo:.1f} ({min(old):.1f}-{max(old):.1f}), this tree median {mn:.1f} "
              f"({min(new):.1f}-{max(new):.1f}): {mn / mo:.2f} x")
EOF
