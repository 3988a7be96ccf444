#!/usr/bin/env bash
# The benchmarks run to completion on small sizes and end with their JSON line (figures are
# not checked: speed is reported, never asserted).
set -euo pipefail
actorlm="$1"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
# A failure shows the end of the benchmark's stderr (an abort under a sanitizer says why there).
fail() { echo "FAIL: $*" >&2; tail -n 40 "$err" >&2; exit 1; }

out=$(timeout 120 "$actorlm" bench kv --requests 300 2>"$err") || fail "bench kv exited $?"
last=$(tail -n 1 <<<"$out")
for key in append_256_us allocate_2k_prefix_us utilization_paged utilization_reserved; do
  grep -q "\"$key\":" <<<"$last" || fail "bench kv: no $key in: $last"
done

out=$(timeout 120 "$actorlm" bench scheduler --steps 20 2>"$err") || fail "bench scheduler exited $?"
last=$(tail -n 1 <<<"$out")
for key in step_overhead_us_256 step_overhead_us_1024; do
  grep -q "\"$key\":" <<<"$last" || fail "bench scheduler: no $key in: $last"
done
out=$(timeout 480 "$actorlm" bench cpu --requests 2 --max-tokens 3 --concurrency 1,2 --prefill-tokens 64 2>"$err") ||
  fail "bench cpu exited $?"
last=$(tail -n 1 <<<"$out")
for key in tokens_per_s_1 tokens_per_s_2 tokens_per_s_one_at_a_time kv_blocks kv_dtype; do
  grep -q "\"$key\":" <<<"$last" || fail "bench cpu: no $key in: $last"
done
out=$(timeout 240 "$actorlm" bench cluster --steps 20 --no-cpu 2>"$err") || fail "bench cluster exited $?"
last=$(tail -n 1 <<<"$out")
for key in remote_step_overhead_us_256 in_process_step_overhead_us_256 step_bytes_256 failover_seconds \
           recovery_seconds; do
  grep -q "\"$key\":" <<<"$last" || fail "bench cluster: no $key in: $last"
done
echo "bench smoke: ok"
