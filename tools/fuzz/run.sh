#!/usr/bin/env bash
# Builds every libFuzzer target of tools/fuzz/ with Debian's clang and runs each for a bounded time
# on its committed corpus. A crash, a sanitizer report, a hang (one input over 10 s), memory past
# 2 GiB or a broken property fails the run (exit 1); the input is kept in build-fuzz/crashes/TARGET/
# and printed. Once it is fixed, commit it to the target's corpus as regress_WHAT, where a CTest
# test replays it in every build.
# Usage: tools/fuzz/run.sh [TARGET...]   (default: gguf safetensors request config)
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_RUNS     instead of a time: this many inputs per target from seed FUZZ_SEED (default 1),
#                 starting from the committed corpus alone, so the run is the same on every machine
#                 and a commit passes or fails it the same way each time (what .ci/run uses)
#   FUZZ_JOBS     targets fuzzed at once (default 2, or 1 on one core)
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:-}
jobs=${FUZZ_JOBS:-$(($(nproc) < 2 ? 1 : 2))}
targets=("$@")
((${#targets[@]})) || targets=(gguf safetensors request config)

declare -A corpus=(
  [gguf]=tests/model/format/corpus/gguf
  [safetensors]=tests/model/format/corpus/safetensors
  [request]=tests/actors/http/corpus/request
  [config]=tests/actors/config/corpus
)
declare -A options=(
  [request]="-dict=tools/fuzz/request.dict -max_len=16384"
  [config]="-dict=tools/fuzz/config.dict"
)
for t in "${targets[@]}"; do
  [[ -n "${corpus[$t]:-}" ]] || { echo "fuzz: unknown target '$t' (known: ${!corpus[*]})" >&2; exit 2; }
done

# 1. clang 14 (Debian 12's), libFuzzer's runtime (libclang_rt.fuzzer*.a: libclang-rt-14-dev) and
#    llvm-symbolizer for readable stacks (llvm-14); the sources' own dependencies.
packages=(clang-14 libclang-rt-14-dev llvm-14 cmake ninja-build nlohmann-json3-dev libtomlplusplus-dev)
# shellcheck source=tools/apt_install.sh
source tools/apt_install.sh
apt_install_missing fuzz "${packages[@]}"
export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14

# 2. Build (ccache shared with the main build when present).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$SECONDS
cmake -S tools/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$jobs" --target "${targets[@]/#/fuzz_}" >&2
echo "fuzz: built ${targets[*]} in $((SECONDS - start)) s" >&2

# 3. Fuzz, $jobs targets at a time. New inputs go to build-fuzz/corpus/TARGET (kept between runs
#    here; the committed corpus is only read).
fuzz_one() {
  local t=$1
  rm -rf "build-fuzz/crashes/$t"
  local found="build-fuzz/corpus/$t" bound=(-max_total_time="$seconds") fixed=()
  if [[ -n "$runs" ]]; then
    # Same inputs every time: fixed seed and count, no corpus reloads (timed), and no address
    # randomization (the sanitizers' coverage differs with the load address).
    found="build-fuzz/corpus-fixed/$t" bound=(-runs="$runs" -seed="${FUZZ_SEED:-1}" -reload=0)
    setarch -R true 2>/dev/null && fixed=(setarch -R)
    rm -rf "$found"
  fi
  mkdir -p "$found" "build-fuzz/crashes/$t" build-fuzz/logs
  local rc=0
  # shellcheck disable=SC2086  # options are words
  "${fixed[@]}" "build-fuzz/fuzz_$t" "${bound[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/crashes/$t/" ${options[$t]:-} "$found" "${corpus[$t]}" \
    >"build-fuzz/logs/$t.log" 2>&1 || rc=$?
  echo "$rc" >"build-fuzz/logs/$t.rc"
}
start=$SECONDS
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
done
wait

failed=0
for t in "${targets[@]}"; do
  log="build-fuzz/logs/$t.log"
  done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [[ $(cat "build-fuzz/logs/$t.rc") == 0 ]]; then
    echo "fuzz: $t: ${done_runs:-?} runs (${rate:-?}/s${runs:+, seed ${FUZZ_SEED:-1}}), no finding"
  else
    failed=1
    echo "fuzz: $t FAILED; the end of $log:"
    grep -v '^"' "$log" | tail -60
    for f in "build-fuzz/crashes/$t"/*; do
      [[ -f "$f" ]] || continue
      echo "fuzz: $t: input kept as $f ($(stat -c %s "$f") bytes), base64:"
      head -c 4096 "$f" | base64 -w 0
      echo
      echo "fuzz: replay it with build-fuzz/fuzz_$t $f"
    done
  fi
done
echo "fuzz: fuzzing took $((SECONDS - start)) s" >&2
exit "$failed"
