#!/usr/bin/env bash
# `actorlm simulate` and `actorlm plan` on small scenarios: the table, --out files, --memory,
# determinism for a seed, and exit 1 with FILE:LINE:COLUMN: KEY for bad files and with the
# numbers for a model that does not fit.
set -euo pipefail
actorlm="$1"
scenarios="$2"   # configs/scenarios
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A shipped scenario cut to 60 requests per workload, no load sweep.
sed -e 's/^requests = .*/requests = 60/' -e '/^load_sweep/d' -e 's/^name = "32in-128out-load"/name = "32in-128out-poisson"/' \
  "$scenarios/falcon40b_g5_12xlarge_tp4.toml" >"$tmp/small.toml"

out=$("$actorlm" simulate "$tmp/small.toml" --out "$tmp/out" 2>"$tmp/err") || fail "simulate exited $?: $(cat "$tmp/err")"
for want in "workload 32in-128out" "workload 256in-32out" "throughput" "dynamic" "continuous" "paged"; do
  grep -q "$want" <<<"$out" || fail "table lacks '$want': $out"
done
for f in memory.svg 32in-128out/summary.csv 32in-128out/requests.csv 32in-128out/series.csv \
         32in-128out/report.json 32in-128out/kv_usage.svg 32in-128out/batch_size.svg 256in-32out/report.json; do
  [[ -s "$tmp/out/$f" ]] || fail "--out did not write $f"
done
[[ $(wc -l <"$tmp/out/32in-128out/requests.csv") -eq $((3 * 60 + 1)) ]] || fail "requests.csv rows"
grep -q '"regimes"' "$tmp/out/32in-128out/report.json" || fail "report.json"
grep -q "<svg" "$tmp/out/memory.svg" || fail "memory.svg"

# Deterministic for a seed; another seed changes the Poisson workload.
"$actorlm" simulate "$tmp/small.toml" --seed 5 --out "$tmp/a" >"$tmp/a.txt" 2>/dev/null
"$actorlm" simulate "$tmp/small.toml" --seed 5 --out "$tmp/b" >"$tmp/b.txt" 2>/dev/null
"$actorlm" simulate "$tmp/small.toml" --seed 6 --out "$tmp/c" >/dev/null 2>/dev/null
cmp -s "$tmp/a.txt" "$tmp/b.txt" || fail "same seed, different tables"
diff -r "$tmp/a" "$tmp/b" >/dev/null || fail "same seed, different files"
cmp -s "$tmp/a/32in-128out-poisson/report.json" "$tmp/c/32in-128out-poisson/report.json" && fail "seeds 5 and 6 gave the same report"

# --memory: the per-GPU breakdown, exit 0.
mem=$("$actorlm" simulate "$tmp/small.toml" --memory 2>"$tmp/err") || fail "--memory exited $?"
grep -q "weights" <<<"$mem" || fail "--memory: $mem"
grep -q "KV for" <<<"$mem" || fail "--memory: $mem"

# A bad value in a regime: exit 1, FILE:LINE:COLUMN: KEY.
sed 's/^scheduler.max_num_seqs = 32/scheduler.max_num_seqs = 0/' "$tmp/small.toml" >"$tmp/bad.toml"
line=$(grep -n '^scheduler.max_num_seqs = 0' "$tmp/bad.toml" | head -1 | cut -d: -f1)
if "$actorlm" simulate "$tmp/bad.toml" >/dev/null 2>"$tmp/err"; then fail "a bad scenario succeeded"; fi
grep -q "bad.toml:$line:[0-9]*: regimes\[1\].scheduler.max_num_seqs" "$tmp/err" || fail "bad override: $(cat "$tmp/err")"

# A model that does not fit: exit 1, what it needs and what there is.
sed -e 's/^tensor_parallel_degree = 4/tensor_parallel_degree = 1/' "$tmp/small.toml" >"$tmp/nofit.toml"
if "$actorlm" simulate "$tmp/nofit.toml" >/dev/null 2>"$tmp/err"; then fail "Falcon-40B on one A10G succeeded"; fi
grep -qi "GB" "$tmp/err" || fail "does-not-fit message lacks numbers: $(cat "$tmp/err")"
if "$actorlm" simulate "$tmp/none.toml" >/dev/null 2>"$tmp/err"; then fail "a missing file succeeded"; fi

# plan on a small grid.
cat >"$tmp/plan.toml" <<'TOML'
[engine]
tensor_parallel_degree = 4
[model]
preset = "falcon-40b"
[cache]
gpu_memory_utilization = 0.98
[slo]
ttft_s = 2.0
tpot_s = 0.1
[[regimes]]
name = "paged"
engine.batching = "paged"
[workload]
requests = 50
input = 32
output = 64
arrival = { process = "closed_loop", clients = 8 }
[plan]
instances = ["g5.12xlarge", "g5.48xlarge"]
tensor_parallel_degrees = [2, 4, 8]
max_num_seqs = [8, 32]
TOML
plan=$("$actorlm" plan "$tmp/plan.toml" --jobs 2 --out "$tmp/plan" 2>"$tmp/err") || fail "plan exited $?: $(cat "$tmp/err")"
grep -q "Pareto front" <<<"$plan" || fail "plan: $plan"
grep -q "skipped, does not fit" <<<"$plan" || fail "plan lists no skipped configuration: $plan"
grep -Eq "cheapest meeting the SLO|no configuration meets the SLO" <<<"$plan" || fail "plan gives no answer"
[[ -s "$tmp/plan/plan.csv" ]] || fail "plan.csv"
if "$actorlm" plan "$tmp/small.toml" >/dev/null 2>"$tmp/err"; then fail "plan without [plan] succeeded"; fi
echo "simulate cli: ok"
