#!/usr/bin/env bash
# make demo: the main job as far as it exists today. Starts a one-member hub
# in a temporary directory, applies the example fleet manifests with roostctl,
# reads them back, and stops the hub. (The QEMU enrollment and reboot part
# arrives with the main-job issue.)
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory build
dir=$(mktemp -d /tmp/roost-demo.XXXXXX)
api=127.0.0.1:17443
bin/roost-hub --data-dir "$dir/hub" --api-addr "$api" --raft-addr 127.0.0.1:17444 --http-addr 127.0.0.1:17480 \
  2>"$dir/hub.log" &
hub=$!
trap 'kill $hub 2>/dev/null; wait $hub 2>/dev/null || true; echo "hub log and data: $dir"' EXIT
export ROOST_CONFIG="$dir/hub/admin.conf"
for _ in $(seq 100); do [ -s "$ROOST_CONFIG" ] && break; sleep 0.1; done
[ -s "$ROOST_CONFIG" ] || { echo "hub did not write $ROOST_CONFIG"; cat "$dir/hub.log"; exit 1; }
run() { echo; echo "\$ $*"; "$@"; }
run bin/roostctl hub members
run bin/roostctl apply -f examples/all.yaml
run bin/roostctl apply -f examples/all.yaml
run bin/roostctl get pools -o wide
run bin/roostctl get pool workers -o yaml
run bin/roostctl describe cluster prod
echo; echo "\$ curl -s http://127.0.0.1:17480/healthz"; curl -s http://127.0.0.1:17480/healthz
