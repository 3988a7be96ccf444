#!/usr/bin/env bash
# Measures `actorlm bench cpu` of this checkout against an earlier commit on the same machine:
# builds that commit's actorlm (a git worktree under ${TMPDIR:-/tmp}, CUDA off, ccache), then
# runs the two binaries alternately, ROUNDS times per measurement, so that a ratio compares runs
# close in time on a shared machine. Prints one JSON line per run and the medians.
#
# Usage: tools/bench/compare_commit.sh COMMIT [ROUNDS]
#   Measurements (flags both binaries' bench cpu understand): one stream, 32 requests; 64
#   concurrent, 64 requests. The default model (models/, tools/setup.sh fetches it).
# Example (issue 15's baseline: the tree before the weights were kept in their file type):
#   tools/bench/compare_commit.sh 7759a87 2
set -euo pipefail
cd "$(dirname "$0")/../.."
commit=${1:?usage: tools/bench/compare_commit.sh COMMIT [ROUNDS]}
rounds=${2:-2}
sha=$(git rev-parse --short "$commit^{commit}")
model="$PWD/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[[ -f "$model" ]] || { echo "compare_commit: $model missing (run: bash tools/setup.sh)" >&2; exit 2; }
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
measurements=("--concurrency 1 --requests 32" "--concurrency 64 --requests 64")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for m in "${measurements[@]}"; do
    for side in old new; do
      bin=$old; [[ $side == new ]] && bin=$new
      echo "compare_commit: round $r, $side ($([[ $side == old ]] && echo "$sha" || echo this tree)), bench cpu $m" >&2
      # shellcheck disable=SC2086  # $m is a list of flags
      line=$("$bin" bench cpu --model "$model" $m --no-baseline 2>/dev/null)
      echo "{\"side\":\"$side\",\"round\":$r,\"result\":$line}" | tee -a "$out"
    done
  done
done

python3 - "$out" "$sha" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for c in (1, 64):
    key = f"tokens_per_s_{c}"
    old = [r["result"][key] for r in runs if r["side"] == "old" and key in r["result"]]
    new = [r["result"][key] for r in runs if r["side"] == "new" and key in r["result"]]
    if old and new:
        mo, mn = statistics.median(old), statistics.median(new)
        print(f"{key}: {sys.argv[2]} median {mo:.1f} ({min(old):.1f}-{max(old):.1f}), this tree median {mn:.1f} "
              f"({min(new):.1f}-{max(new):.1f}): {mn / mo:.2f} x")
EOF
