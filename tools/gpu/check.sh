#!/usr/bin/env bash
# The one script a GPU machine runs: every GPU test, the GPU benchmarks, and HF transformers'
# generate() as the baseline, with a JSON summary. Prepared so one run takes a few minutes.
#
#   tools/gpu/check.sh            with .gpu-bundle/ from tools/gpu/prepare.sh (a machine without
#                                 our Debian libraries, such as the lent H200): runs the bundle
#   tools/gpu/check.sh --build    a development machine with a GPU: builds build-gpu/ for its GPU
#
# Writes to ${OUT:-gpu-check-out}: gpu-check.json (summary), gpu-check.log (every program's
# output), decode_attention.json, gemm.json, sample.json, e2e.json (tools/gpu/e2e.sh: actorlm serve on the
# GPU at 1/64/256 concurrent requests, HF transformers generate() on the same weights).
# Exits non-zero when a test failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
out="${OUT:-$root/gpu-check-out}"
mkdir -p "$out"
log="$out/gpu-check.log"
: >"$log"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "gpu-check: ${gpu:-no GPU visible}" | tee -a "$log"
status=ok

# 1. The programs: from the bundle, or built here.
if [[ ${1:-} == --build ]]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if ! { cmake -S . -B build-gpu -G Ninja -DACTORLM_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
          -DCMAKE_CUDA_ARCHITECTURES=native && cmake --build build-gpu -j"$(nproc)"; } >>"$log" 2>&1; then
    status=build_failed
  fi
  bin=$root/build-gpu/tests bench=$root/build-gpu/tools libs="" actorlm=$root/build-gpu/tools/actorlm
  ctest --test-dir build-gpu -L gpu --show-only=json-v1 2>>"$log" | python3 -c '
import json, os, sys
for t in json.load(sys.stdin)["tests"]:
    print(t["name"], os.path.basename(t["command"][0]), *t["command"][1:])' >"$out/tests.txt"
  tests_file=$out/tests.txt
elif [[ -f .gpu-bundle/bundle.tar.xz ]]; then
  b=$(mktemp -d /tmp/actorlm-gpu.XXXX)
  tar -C "$b" -xJf .gpu-bundle/bundle.tar.xz
  bin=$b/bin bench=$b/bin libs=$b/lib tests_file=$b/tests.txt actorlm=$b/bin/actorlm
  # cuBLAS and NCCL are not in the bundle: the machine's own (its CUDA toolkit's, or PyTorch's wheels').
  for lib in libcublas.so.13 libnccl.so.2; do
    if LD_LIBRARY_PATH=$libs ldd "$bin/actorlm" | grep -q "${lib%%.so*}.*not found"; then
      found=$(find /usr/local /opt /usr/lib /usr/lib64 -name "$lib" 2>/dev/null | head -1)
      [[ -n $found ]] && libs+=":$(dirname "$found")"
      echo "gpu-check: $lib from ${found:-nowhere (what needs it will fail)}" | tee -a "$log"
    fi
  done
else
  echo "gpu-check: no .gpu-bundle/bundle.tar.xz (run tools/gpu/prepare.sh first) and no --build" | tee -a "$log"
  exit 2
fi

# Runs a program with the bundle's libraries (only it: python must keep its own).
run_prog() { LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout "$@"; }

# 2. Every GPU test: 0 passed, 77 skipped (no device), anything else failed.
tests_json=""
if [[ $status == ok ]]; then
  while read -r name prog args; do
    start=$(date +%s%N)
    echo "== test $name" >>"$log"
    run_prog 300 "$bin/$prog" $args >>"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    result=failed
    [[ $rc == 0 ]] && result=passed
    [[ $rc == 77 ]] && result=skipped
    [[ $result == failed ]] && status=tests_failed
    echo "test $name: $result (exit $rc, ${secs}s)" | tee -a "$log"
    tests_json+="${tests_json:+, }{\"name\": \"$name\", \"result\": \"$result\", \"exit\": $rc, \"seconds\": $secs}"
  done <"$tests_file"
fi

# 3. Benchmarks: decode attention against the copy bandwidth, cuBLAS GEMMs, sampling.
echo "== decode_attention_bench" >>"$log"
run_prog 240 "$bench/decode_attention_bench" --json "$out/decode_attention.json" 2>&1 | tee -a "$log"
da_rc=${PIPESTATUS[0]}
echo "== gemm_bench" >>"$log"
run_prog 120 "$bench/gemm_bench" --json "$out/gemm.json" 2>&1 | tee -a "$log"
gemm_rc=${PIPESTATUS[0]}
echo "== sample_bench" >>"$log"
run_prog 120 "$bench/sample_bench" --json "$out/sample.json" 2>&1 | tee -a "$log"
sample_rc=${PIPESTATUS[0]}

# 4. End to end: actorlm serve on the GPU under bench client, HF generate() on the same weights,
# the official openai client's test where the machine has what it needs.
tools/gpu/e2e.sh "$actorlm" "$libs" "$out" 2>&1 | tee -a "$log"

json_of() { [[ -s $1 ]] && cat "$1" || echo null; }
printf '{"gpu": "%s", "status": "%s", "tests": [%s],\n "decode_attention_exit": %s, "decode_attention": %s,\n "gemm_exit": %s, "gemm": %s,\n "sample_exit": %s, "sample": %s,\n "e2e": %s}\n' \
  "${gpu:-none}" "$status" "$tests_json" "$da_rc" "$(json_of "$out/decode_attention.json")" \
  "$gemm_rc" "$(json_of "$out/gemm.json")" "$sample_rc" "$(json_of "$out/sample.json")" \
  "$(json_of "$out/e2e.json")" >"$out/gpu-check.json"
echo "gpu-check: $status; summary in $out/gpu-check.json"
[[ $status == ok ]]
