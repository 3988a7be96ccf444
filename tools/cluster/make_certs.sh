#!/usr/bin/env bash
# Makes a cluster CA and one certificate per node for [cluster] tls_cert / tls_key / tls_ca:
#   tools/cluster/make_certs.sh DIR head worker1 worker2
# writes DIR/ca.pem (tls_ca on every node), DIR/ca.key (keep it off the nodes), and
# DIR/NODE.pem + DIR/NODE.key for each NODE. Keys are ECDSA P-256; certificates last 825 days.
# Existing files are kept: run it again with new names to add nodes to the same CA.
set -euo pipefail
if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  echo "usage: $0 DIR NODE [NODE...]  (e.g. $0 certs head worker1 worker2)" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "$0: needs the openssl command (apt-get install openssl)" >&2; exit 1; }
dir=$1
shift
mkdir -p "$dir"
umask 077
if [[ ! -f $dir/ca.pem ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
    -subj "/CN=actorlm cluster CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  echo "made $dir/ca.pem (the cluster CA; its key $dir/ca.key signs node certificates)"
fi
for node in "$@"; do
  [[ $node =~ ^[A-Za-z0-9._-]+$ ]] || { echo "$0: node name '$node': letters, digits, . _ - only" >&2; exit 2; }
  if [[ -f $dir/$node.pem ]]; then
    echo "kept $dir/$node.pem"
    continue
  fi
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$node" \
    -keyout "$dir/$node.key" -out "$dir/$node.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$node.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 825 -out "$dir/$node.pem" 2>/dev/null
  rm -f "$dir/$node.csr"
  echo "made $dir/$node.pem and $dir/$node.key"
done
chmod 644 "$dir"/*.pem
