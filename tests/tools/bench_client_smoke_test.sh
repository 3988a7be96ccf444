#!/usr/bin/env bash
# bench client against `actorlm serve` on the sim backend in wall-clock mode (a free loopback
# port): a closed-loop and a Poisson workload of one scenario file; the report has simulate's
# table, JSON and --out files, every request completes with the asked output length, and the
# client's mean TTFT and ITL (= token-weighted TPOT) match the server's own records of the same
# requests (the engine's /metrics sums, read before and after each run). Those differences are
# printed, as a figure; the test bounds them only loosely (TTFT: -1 to +25 ms, ITL: 5 ms), well
# under one modelled step (~34 ms), so that a client measuring from the wrong event fails it but
# a slow build or a loaded machine (ASan in CI: TTFT +4.9 ms) does not. Measured on a normal
# build: ITL within 0.01 ms, TTFT +0.5 to +1.1 ms (the front end's parse and tokenization).
# A third workload asks for max_tokens 64 with lengths of 4 to 20: every request stops early at
# its length (the server counts 12 stops, no length finishes, none longer or shorter than asked).
set -euo pipefail
actorlm="$1"
src="$(cd "$(dirname "$0")/../.." && pwd)"
work=$(mktemp -d)
server_pid=
cleanup() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$work/serve.log" ]] && tail -n 20 "$work/serve.log" >&2; exit 1; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed "s/^port = .*/port = $port/" "$src/configs/sim-falcon40b-g5.48xlarge.toml" > "$work/server.toml"
cat > "$work/scenario.toml" <<'TOML'
[scenario]
name = "bench client smoke"
seed = 3

[[workloads]]
name = "closed"
requests = 12
input = 64
output = 16
arrival = { process = "closed_loop", clients = 4 }

[[workloads]]
name = "poisson"
requests = 12
input = 48
output = 12
arrival = { process = "poisson", rate = 8.0 }

[[workloads]]
name = "capped"
requests = 12
input = 32
output = { distribution = "uniform", min = 4, max = 20 }
max_tokens = 64
arrival = { process = "closed_loop", clients = 4 }
TOML
"$actorlm" serve --config "$work/server.toml" > "$work/serve.log" 2>&1 &
server_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 100); do curl -sf "$url/health" >/dev/null && break; sleep 0.1; done
curl -sf "$url/health" >/dev/null || fail "the server did not come up"

# The closed loop twice: the second time on kept-alive connections (4 clients: 4 connections, 8
# requests on reused ones).
for run_name in closed poisson capped closed+keep-alive; do
  wl=${run_name%%+*}
  flags=()
  [[ "$run_name" == *+keep-alive ]] && flags=(--keep-alive)
  before=$(curl -sf "$url/metrics")
  timeout 120 "$actorlm" bench client "$url" "$work/scenario.toml" --workload "$wl" --json --out "$work/out-$wl" \
    "${flags[@]}" > "$work/$wl.out" 2> "$work/$wl.err" || fail "bench client ($run_name) exited $?: $(cat "$work/$wl.err")"
  after=$(curl -sf "$url/metrics")
  grep -q '^regime .*| throughput tok/s | req/s' "$work/$wl.out" || fail "$wl: no table"
  grep -q "^measured " "$work/$wl.out" || fail "$wl: no measured row: $(cat "$work/$wl.out")"
  grep -q "^$wl: client: .* s CPU over" "$work/$wl.out" || fail "$wl: no client CPU line"
  grep -q "lengths are approximate" "$work/$wl.err" || fail "$wl: no approximate-length warning"
  for f in summary.csv requests.csv report.json; do
    [[ -s "$work/out-$wl/$wl/$f" ]] || fail "$wl: no $f under --out"
  done
  python3 - "$wl" "$(tail -n 1 "$work/$wl.out")" "$before" "$after" "$run_name" <<'PY' || fail "$run_name: see above"
import json, re, sys
wl, line, before, after, run_name = sys.argv[1:]
j = json.loads(line)
run = j["runs"][0]
s, c = run["summary"], run["client"]
def metric(text, name):
    return float(re.search(r"^actorlm_%s (\S+)$" % re.escape(name), text, re.M).group(1))
def delta(name):
    return metric(after, name) - metric(before, name)
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL:", wl, what, file=sys.stderr); ok = False
check(j["bench"] == "client" and run["workload"] == wl, "header")
check(s["requests"] == 12 and s["completed"] == 12 and c["errors"] == {}, "not all completed: %s" % c)
check(c["short_outputs"] == 0 and c["long_outputs"] == 0, "output lengths: %s" % c)
if wl == "capped":
    check(delta('request_success_total{finished_reason="stop"}') == 12, "not 12 early stops")
    check(delta('request_success_total{finished_reason="length"}') == 0, "a request ran to max_tokens")
    check(12 * 4 <= s["output_tokens"] <= 12 * 20, "output tokens: %s" % s["output_tokens"])
else:
    asked = {"closed": 16, "poisson": 12}[wl]
    check(s["output_tokens"] == 12 * asked, "output lengths: %s" % s["output_tokens"])
for k in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
    check(s[k]["count"] > 0 and s[k]["p50"] > 0, k)
check(c["cpu_s"] > 0 and c["peak_streams"] >= 1, "client figures")
reused = 8 if run_name.endswith("+keep-alive") else 0
check(c["reused_connections"] == reused, "%s requests on reused connections, not %d" % (c["reused_connections"], reused))
n = delta("time_to_first_token_seconds_count")
check(n == 12, "the server recorded %s requests" % n)
server_ttft = delta("time_to_first_token_seconds_sum") / n
server_itl = delta("inter_token_latency_seconds_sum") / delta("inter_token_latency_seconds_count")
d_ttft = (s["ttft_s"]["mean"] - server_ttft) * 1e3
d_itl = (s["itl_s"]["mean"] - server_itl) * 1e3
print("%s: TTFT mean client %.3f ms, server %.3f ms (%+.3f ms); ITL mean client %.3f ms, server %.3f ms (%+.3f ms)"
      % (run_name, s["ttft_s"]["mean"] * 1e3, server_ttft * 1e3, d_ttft, s["itl_s"]["mean"] * 1e3, server_itl * 1e3, d_itl))
check(-1.0 < d_ttft < 25.0, "TTFT off the server's by %.3f ms" % d_ttft)
check(abs(d_itl) < 5.0, "ITL off the server's by %.3f ms" % d_itl)
sys.exit(0 if ok else 1)
PY
done

# The same scenario through the flags (no file): a Poisson run, and a bad URL.
"$actorlm" bench client "$url" --requests 3 --input 8 --output 4 --rate 20 > "$work/flags.out" 2>/dev/null ||
  fail "bench client with flags exited $?"
grep -q "Poisson 20 req/s" "$work/flags.out" || fail "flags: $(cat "$work/flags.out")"
if "$actorlm" bench client "https://127.0.0.1:$port" --requests 1 2> "$work/bad.err"; then fail "https accepted"; fi
grep -q "https is not supported" "$work/bad.err" || fail "https: $(cat "$work/bad.err")"
echo "bench client smoke: ok"
