#!/usr/bin/env bash
# The one script a lent GPU machine runs: builds actorlm with CUDA for the GPU at hand, runs every
# GPU test (CTest label "gpu"; they exit 77 = skipped where no device is visible) and writes a JSON
# summary to ${OUT:-.}/gpu-check.json. Usage: tools/gpu/check.sh [CUDA_ARCHITECTURES]  (default 90: H100/H200)
# Run it once per lent machine; read the summary, then give the machine back.
set -uo pipefail
cd "$(dirname "$0")/../.."
arch="${1:-90}"
out="${OUT:-.}"
mkdir -p "$out"
summary="$out/gpu-check.json"
log="$out/gpu-check.log"

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "gpu-check: ${gpu:-no GPU visible} (nvcc: $nvcc, arch $arch)" | tee "$log"

status=ok
if ! bash tools/setup.sh >>"$log" 2>&1; then status=setup_failed; fi
if [[ $status == ok ]] && ! { cmake -S . -B build-gpu -G Ninja -DACTORLM_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
      -DCMAKE_CUDA_ARCHITECTURES="$arch" && cmake --build build-gpu -j"$(nproc)"; } >>"$log" 2>&1; then
  status=build_failed
fi
tests_json="[]"
if [[ $status == ok ]]; then
  ctest --test-dir build-gpu -L gpu --output-on-failure --output-junit "$PWD/build-gpu/gpu-junit.xml" >>"$log" 2>&1 || status=tests_failed
  # One entry per GPU test: name and result, from CTest's JUnit report.
  tests_json=$(python3 - "$PWD/build-gpu/gpu-junit.xml" <<'PY'
import json, sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print("[]"); sys.exit()
out = []
for case in root.iter("testcase"):
    result = "passed"
    if case.find("failure") is not None: result = "failed"
    elif case.find("skipped") is not None or case.get("status") == "notrun": result = "skipped"
    out.append({"name": case.get("name"), "result": result, "seconds": float(case.get("time") or 0)})
print(json.dumps(out))
PY
)
fi
printf '{"gpu": "%s", "cuda_architectures": "%s", "status": "%s", "tests": %s}\n' \
  "${gpu:-none}" "$arch" "$status" "$tests_json" | tee "$summary"
[[ $status == ok ]]
