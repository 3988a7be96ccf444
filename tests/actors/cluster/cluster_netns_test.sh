#!/usr/bin/env bash
# A cluster on real addresses: head and two workers each in a network namespace of their own,
# joined by veth pairs to a bridge in a fourth, with 1 ms of delay on every link (tc netem) where
# the kernel has netem, else every link paced at 20 Mbit/s (tc tbf). Nothing goes through loopback: the head reaches the workers, and the
# workers' ranks reach each other (Gloo), over 10.231.0.0/24, with mutual TLS. The answer must be
# exactly that of the same ranks in one process; a worker without TLS must refuse to listen on a
# non-loopback address. Every namespace is the test's own and is removed at exit.
# Needs root and iproute2; exits 77 (CTest: skipped) without them.
set -euo pipefail
shopt -s nullglob
actorlm="$1"
source_dir="$2"
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }

if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then
  echo "skipped: needs root and iproute2 (ip netns)"
  exit 77
fi
tmp=$(mktemp -d)
ns_prefix="actorlm-$$"
nodes=(h w1 w2)
declare -A addr=([h]=10.231.0.1 [w1]=10.231.0.2 [w2]=10.231.0.3)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in "${nodes[@]}" br; do ip netns del "$ns_prefix-$n" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
if ! ip netns add "$ns_prefix-br" 2>/dev/null; then
  echo "skipped: cannot create network namespaces here"
  exit 77
fi
ip -n "$ns_prefix-br" link add br0 type bridge
ip -n "$ns_prefix-br" link set br0 up
delay="none"
for n in "${nodes[@]}"; do
  ns="$ns_prefix-$n"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add eth0 netns "$ns" type veth peer name "p-$n" netns "$ns_prefix-br"
  ip -n "$ns_prefix-br" link set "p-$n" master br0 up
  ip -n "$ns" addr add "${addr[$n]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  if ip netns exec "$ns" tc qdisc add dev eth0 root netem delay 1ms 2>/dev/null; then
    delay="1 ms each way (tc netem)"
  elif ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 20mbit burst 1600 latency 200ms 2>/dev/null; then
    # No netem (this project's kernels): a token bucket of one packet at 20 Mbit/s paces every
    # link instead, about 0.6 ms per full packet, so messages still take real time to cross.
    delay="none fixed; each link paced at 20 Mbit/s with a one-packet burst (tc tbf; this kernel has no netem)"
  fi
done
echo "namespaces up; added delay: $delay"
[[ $delay == none ]] && echo "note: this kernel has neither the netem nor the tbf qdisc; the links run as they are"

"$source_dir/tools/cluster/make_certs.sh" "$tmp/certs" h w1 w2 >/dev/null
shared='[engine]
tensor_parallel_degree = 3
[cache]
cpu_kv_space = 0.125
swap_space = 0.0625
[model]
max_model_len = 1024
'
tls() { printf '[cluster]\nheartbeat_interval_s = 1.0\ntls_cert = "%s/certs/%s.pem"\ntls_key = "%s/certs/%s.key"\ntls_ca = "%s/certs/ca.pem"\n' "$tmp" "$1" "$tmp" "$1" "$tmp"; }
for n in w1 w2; do { echo "$shared"; tls "$n"; } >"$tmp/$n.toml"; done
{ echo "$shared"; tls h; echo "workers = [\"${addr[w1]}:7101\", \"${addr[w2]}:7102\"]"; } >"$tmp/h.toml"
echo "$shared" >"$tmp/plain.toml"

# Plaintext is refused off loopback.
if ip netns exec "$ns_prefix-w1" timeout 60 "$actorlm" worker --listen "${addr[w1]}:7101" --config "$tmp/plain.toml" \
     >"$tmp/refused.log" 2>&1; then
  fail "a worker without TLS listened on ${addr[w1]}"
fi
grep -q "refusing to listen on ${addr[w1]}:7101 without TLS" "$tmp/refused.log" || fail "no refusal: $(cat "$tmp/refused.log")"

ip netns exec "$ns_prefix-w1" "$actorlm" worker --listen "${addr[w1]}:7101" --config "$tmp/w1.toml" >"$tmp/w1.log" 2>&1 &
pids+=($!)
ip netns exec "$ns_prefix-w2" "$actorlm" worker --listen "${addr[w2]}:7102" --config "$tmp/w2.toml" >"$tmp/w2.log" 2>&1 &
pids+=($!)
for n in w1 w2; do
  for _ in $(seq 1 600); do grep -q "worker listening on" "$tmp/$n.log" && break; sleep 0.1; done
  grep -q "worker listening on ${addr[$n]}" "$tmp/$n.log" || fail "worker $n did not start"
done

for args in "--max-tokens 16" "--max-tokens 16 --temperature 0.9 --seed 11"; do
  # shellcheck disable=SC2086
  want=$(timeout 300 "$actorlm" generate $args --tp 3 --config "$tmp/plain.toml" 2>"$tmp/one.log") ||
    fail "generate in one process: $(tail -n 5 "$tmp/one.log")"
  # shellcheck disable=SC2086
  got=$(ip netns exec "$ns_prefix-h" timeout 300 "$actorlm" generate $args --config "$tmp/h.toml" 2>"$tmp/head.log") ||
    fail "generate on the cluster ($args)"
  [[ "$got" == "$want" ]] || fail "generate $args: the cluster said '$got', one process '$want'"
  grep -q "(mutual TLS) takes ranks \[1, 2\]" "$tmp/head.log" || fail "the head log does not show the TLS placement"
  echo "generate $args: the same on the cluster: '$got'"
done
grep -q "ranks \[1, 2\] ready" "$tmp/w2.log" || fail "worker w2 never hosted its ranks"
echo "cluster across network namespaces: ok"
