#!/usr/bin/env bash
# bench serve and bench soak run to completion on small sizes with their clients in a separate
# process, and end with their JSON line; the soak leaves no KV block in use and loses no request.
# Figures are not checked: speed is reported, never asserted.
set -euo pipefail
actorlm="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(json.dumps(eval(sys.argv[2], {}, {"j": j})))' "$1" "$2"; }

out=$(timeout 120 "$actorlm" bench serve --streams 1,16 --max-tokens 8 --slow-connections 50 --health-samples 3 \
      2>/dev/null) || fail "bench serve exited $?"
last=$(tail -n 1 <<<"$out")
for key in overhead_us_per_token_p50 overhead_us_per_token_p99 overhead_us_per_token_p99_1 overhead_us_per_token_p99_16 \
           server_cpu_us_per_token max_streams_sustained health_ms_with_slow_connections levels clients; do
  grep -q "\"$key\":" <<<"$last" || fail "bench serve: no $key in: $last"
done
grep -q '"clients":"separate process' <<<"$last" || fail "bench serve: clients not in a separate process: $last"
[[ $(field "$last" 'len(j["levels"])') == 2 ]] || fail "bench serve: not two levels: $last"
[[ $(field "$last" '[l["streams"] for l in j["levels"]]') == "[1, 16]" ]] || fail "bench serve: levels: $last"
[[ $(field "$last" 'sum(l["failed"] for l in j["levels"])') == 0 ]] || fail "bench serve: streams failed: $last"
[[ $(field "$last" '[l["tokens"] for l in j["levels"]]') == "[8, 128]" ]] || fail "bench serve: tokens not all joined: $last"
[[ $(field "$last" 'j["health"]["status"]') == "[200, 200, 200]" ]] || fail "bench serve: /health did not answer: $last"
# The send floor ran each level through the same client: every token joined to its step.
for key in send_floor_us_per_token_p99 send_floor_us_per_token_p50_1 send_floor_us_per_token_p99_16; do
  grep -q "\"$key\":" <<<"$last" || fail "bench serve: no $key in: $last"
done
[[ $(field "$last" '[(l["send_floor"]["tokens"], l["send_floor"]["failed"]) for l in j["levels"]]') == "[[8, 0], [128, 0]]" ]] ||
  fail "bench serve: the send floor's tokens not all joined: $last"
out=$(timeout 120 "$actorlm" bench serve --streams 1 --max-tokens 2 --slow-connections 0 --no-send-floor 2>/dev/null) ||
  fail "bench serve --no-send-floor exited $?"
last=$(tail -n 1 <<<"$out")
[[ $(field "$last" '"send_floor" in j["levels"][0] or "send_floor_us_per_token_p99" in j') == false ]] ||
  fail "bench serve --no-send-floor measured the floor: $last"

out=$(timeout 120 "$actorlm" bench soak --seconds 5 --concurrency 32 --max-tokens 16 2>/dev/null) ||
  fail "bench soak exited $? with: $(tail -n 1 <<<"$out")"
last=$(tail -n 1 <<<"$out")
for key in requests_sent requests_finished requests_errored requests_aborted requests_disconnected requests_lost \
           blocks_in_use_at_end rss_kib_start rss_kib_end; do
  grep -q "\"$key\":" <<<"$last" || fail "bench soak: no $key in: $last"
done
[[ $(field "$last" 'j["blocks_in_use_at_end"]') == 0 ]] || fail "bench soak: KV blocks left in use: $last"
[[ $(field "$last" 'j["requests_lost"]') == 0 ]] || fail "bench soak: requests lost: $last"
[[ $(field "$last" 'j["requests_sent"] == j["requests_finished"] + j["requests_errored"] + j["requests_aborted"] + j["requests_disconnected"] + j["requests_lost"]') == true ]] || fail "bench soak: counts do not add up: $last"
[[ $(field "$last" 'j["requests_finished"] > 0 and j["requests_aborted"] > 0 and j["requests_disconnected"] > 0') == true ]] ||
  fail "bench soak: the mix did not finish, abort and disconnect requests: $last"
echo "bench serve smoke: ok"
