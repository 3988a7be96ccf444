# Sourced by the tests that drive `actorlm serve` with a tool from PyPI (aiperf_test.sh,
# lm_eval_test.sh).
#   skip_without TOOL WHAT SETUP: exits 77 (CTest's skipped) when the executable TOOL is missing,
#     saying that SETUP installs WHAT.
#   start_server ACTORLM: starts the server (default config: cpu backend, default model) on a
#     free loopback port with its log in a fresh directory; on exit the server is stopped and the
#     directory removed. Sets `work` (the directory) and `url`.
#   fail MESSAGE: ends the test, with the server's last log lines.

skip_without() {
  [[ -x "$1" ]] && return 0
  echo "skipped: $2 is not installed ($1); bash $3 installs it"
  exit 77
}

work=
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  if [[ -n "$work" ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  if [[ -n "$work" ]]; then tail -n 20 "$work/serve.log" >&2; fi
  exit 1
}

start_server() {
  work=$(mktemp -d)
  "$1" serve --port 0 > "$work/serve.log" 2>&1 &
  server_pid=$!
  url=
  for _ in $(seq 300); do
    url=$(grep -oE 'listening on http://127\.0\.0\.1:[0-9]+' "$work/serve.log" | head -n 1 | sed 's/listening on //') || true
    [[ -n "$url" ]] && return 0
    sleep 0.1
  done
  fail "the server did not start"
}
