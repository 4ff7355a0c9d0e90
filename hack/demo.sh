#!/usr/bin/env bash
# make demo: the Roost main job on your machine, narrated.
#
#   1. installs what it needs (images/deps.sh --e2e: QEMU, OVMF, OpenSSH
#      client, jq) and builds the binaries, the testbed OS and the
#      Kubernetes binaries (make build testbed testbin)
#   2. starts a one-member hub in a temporary directory (loopback only)
#   3. pushes the testbed OS release and the roost-agent system extension
#      (the testbed OS, like a stock Flatcar, has no agent of its own)
#   4. starts a Kubernetes control plane on this machine (etcd,
#      kube-apiserver, kube-controller-manager: hack/kubecluster), records
#      it as Cluster "demo" with its credentials, and pushes the kubelet as
#      a system extension
#   5. bakes an enrollment ISO (roost-image enroll) that calls home to the hub
#   6. applies a small fleet (examples/demo.yaml: NetworkProfile, MachineClass
#      with the kubelet extension and an SSH key made for this run, Pool
#      "demo" of workers of Cluster demo)
#   7. boots a UEFI QEMU server with an empty 10 GiB disk and the ISO
#   8. waits until the server has enrolled, assigns it to pool demo as
#      demo-1, and follows its Machine: Scheduled, Provisioned (the agent
#      installed the disk and the server rebooted into its Revision), its
#      Node registered and Ready, Machine Ready
#   9. tells you how to log in and look around; Enter (or Ctrl-C) stops
#      the server, the control plane and the hub.
#
# QEMU runs without KVM when there is none: expect 10-20 minutes in total
# (and ~15 more the first time, to build the Kubernetes binaries).
# Needs root (the testbed OS is built with debootstrap).
# Env: ROOST_DEMO_PORT_BASE (default 27440: hub API +3, Raft +4, HTTP +5,
#      SSH to the server +6), ROOST_DEMO_TIMEOUT (seconds, default 2400),
#      ROOST_DEMO_WAIT=0 to stop right after Ready instead of waiting for Enter.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s)
say() { printf '\n[%4ds] %s\n' "$(($(date +%s) - t0))" "$*"; }
die() { printf '\ndemo: %s\n' "$*" >&2; exit 1; }

base=${ROOST_DEMO_PORT_BASE:-27440}
api_port=$((base + 3)) raft_port=$((base + 4)) http_port=$((base + 5)) ssh_port=$((base + 6))
timeout=${ROOST_DEMO_TIMEOUT:-2400}
uuid=6f0e3c2a-52d1-4b7e-9a51-0000000de301
mac=52:54:00:de:30:01

port_busy() {
	if command -v ss >/dev/null; then
		[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}
for p in $api_port $raft_port $http_port $ssh_port; do
	port_busy "$p" && die "port 127.0.0.1:$p is in use; pick other ports with ROOST_DEMO_PORT_BASE=N (uses N+3..N+6)"
done

# ---- 1. prerequisites ---------------------------------------------------------
say "Prerequisites: QEMU, OVMF, OpenSSH client, jq (images/deps.sh --e2e); binaries, the testbed OS and Kubernetes (make build testbed testbin)"
[ "$(id -u)" = 0 ] || die "run as root: images/deps.sh installs packages and the testbed OS is built with debootstrap"
./images/deps.sh --e2e
make --no-print-directory build testbed
testbin=$(./hack/testbin/build.sh)
kver=$(basename "$testbin"); kver=${kver#kubernetes-}; kver=${kver%%-etcd-*}
for c in qemu-system-x86_64 jq ssh ssh-keygen; do command -v "$c" >/dev/null || die "$c missing after images/deps.sh --e2e"; done
bundle=_output/testbed/bundle
[ -f "$bundle/release.json" ] || die "no testbed release bundle in $bundle"

dir=$(mktemp -d /tmp/roost-demo.XXXXXX)
hub_pid= vm_pid= kube_pid= node_pid=
cleanup() {
	trap - EXIT INT TERM
	[ -n "$node_pid" ] && { kill "$node_pid" 2>/dev/null; wait "$node_pid" 2>/dev/null || true; }
	[ -n "$vm_pid" ] && { kill "$vm_pid" 2>/dev/null; wait "$vm_pid" 2>/dev/null || true; }
	[ -n "$kube_pid" ] && { kill "$kube_pid" 2>/dev/null; wait "$kube_pid" 2>/dev/null || true; }
	[ -n "$hub_pid" ] && { kill "$hub_pid" 2>/dev/null; wait "$hub_pid" 2>/dev/null || true; }
	echo
	echo "demo: stopped the server, the control plane and the hub. Logs and data stay in $dir (console.log, hub.log, kube.log, hub/)."
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 2. hub -----------------------------------------------------------------
say "Starting a one-member hub (API 127.0.0.1:$api_port, data $dir/hub, log $dir/hub.log)"
bin/roost-hub --data-dir "$dir/hub" --api-addr "127.0.0.1:$api_port" --raft-addr "127.0.0.1:$raft_port" \
	--http-addr "127.0.0.1:$http_port" >"$dir/hub.log" 2>&1 &
hub_pid=$!
export ROOST_CONFIG=$dir/hub/admin.conf
for _ in $(seq 300); do [ -s "$ROOST_CONFIG" ] && break; kill -0 "$hub_pid" 2>/dev/null || break; sleep 0.2; done
[ -s "$ROOST_CONFIG" ] || { tail -20 "$dir/hub.log" >&2; die "the hub wrote no $ROOST_CONFIG"; }
run() { printf '$ %s\n' "$*"; "$@"; }
ctl() { bin/roostctl "$@"; }
run bin/roostctl hub members

# ---- 3. image ---------------------------------------------------------------
say "Pushing the testbed OS release to the hub"
relkey=_output/testbed/release-key.pub
[ -f "$relkey" ] || die "no $relkey (make testbed signs the bundle with it)"
run bin/roostctl image push "$bundle" --key "$relkey"
say "Pushing the agent as a system extension (the testbed OS, like a stock Flatcar, has no roost-agent; every Revision runs this one)"
agentext=_output/testbed/roost-agent.raw
[ -f "$agentext" ] || die "no $agentext (make testbed builds it)"
run bin/roostctl extension push "$agentext"

# ---- 4. Kubernetes --------------------------------------------------------------
say "Starting a Kubernetes control plane for the worker (etcd, kube-apiserver, kube-controller-manager $kver; log $dir/kube.log)"
go build -o "$dir/kubecluster" ./hack/kubecluster
KUBEBUILDER_ASSETS=$testbin "$dir/kubecluster" serve -dir "$dir/kube" -node-ip 10.0.2.2 >"$dir/kube.log" 2>&1 &
kube_pid=$!
mkdir -p "$dir/kube"
for _ in $(seq 600); do [ -s "$dir/kube/url" ] && break; kill -0 "$kube_pid" 2>/dev/null || break; sleep 0.2; done
[ -s "$dir/kube/url" ] || { tail -20 "$dir/kube.log" >&2; die "the control plane did not start (see $dir/kube.log)"; }
kube_url=$(cat "$dir/kube/url")
say "Recording it as Cluster demo: the guest reaches the API server as https://10.0.2.2:${kube_url##*:}"
{
	printf 'apiVersion: roost.io/v1\nkind: Cluster\nmetadata:\n  name: demo\nspec:\n'
	printf '  apiEndpoint: https://10.0.2.2:%s\n  kubernetesVersion: %s\n  caBundle: |\n' "${kube_url##*:}" "$kver"
	sed 's/^/    /' "$dir/kube/ca.crt"
} >"$dir/cluster.yaml"
run bin/roostctl apply -f "$dir/cluster.yaml"
run bin/roostctl cluster set-credentials demo --kubeconfig "$dir/kube/admin.kubeconfig"
say "Pushing the kubelet $kver as a system extension (built from make testbin's kubelet, signed with the testbed key)"
run bin/roost-image sysext --name kubelet --version "$kver" --file "$testbin/kubelet:/usr/bin/kubelet" \
	--key _output/testbed/release-key.key -o "$dir/kubelet-$kver.raw"
run bin/roostctl extension push "$dir/kubelet-$kver.raw"

# ---- 5. enrollment ISO --------------------------------------------------------
say "Baking the enrollment ISO (the guest reaches the hub as 10.0.2.2:$api_port)"
run bin/roost-image enroll --release "$bundle" --config "$ROOST_CONFIG" --hub "10.0.2.2:$api_port" \
	--release-key "$relkey" --extension "$agentext" --create-token --expires 2h -o "$dir/enroll.iso"

# ---- 6. fleet -----------------------------------------------------------------
say "Applying the demo fleet (examples/demo.yaml) with an SSH key made for this run"
ssh-keygen -q -t ed25519 -N '' -C roost-demo -f "$dir/id_ed25519"
pub=$(cat "$dir/id_ed25519.pub")
awk -v k="$pub" '/^    - ssh-ed25519 / { print "    - " k; next } { print }' examples/demo.yaml >"$dir/demo.yaml"
run bin/roostctl apply -f "$dir/demo.yaml"

# ---- 7. the server --------------------------------------------------------------
truncate -s 10G "$dir/disk.raw"
cp /usr/share/OVMF/OVMF_VARS_4M.fd "$dir/vars.fd"
say "Booting the server: UEFI QEMU, empty 10 GiB disk, the ISO as CD-ROM (console: tail -f $dir/console.log)"
qemu-system-x86_64 -name roost-demo -machine pc -m 2560 -smp 1 \
	-display none -monitor none -nodefaults -vga std \
	-drive if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd \
	-drive "if=pflash,format=raw,unit=1,file=$dir/vars.fd" \
	-smbios "type=1,manufacturer=Roost,product=demo,uuid=$uuid" \
	-chardev "file,id=con0,path=$dir/console.log,append=on" -serial chardev:con0 \
	-drive "if=none,id=disk0,format=raw,file=$dir/disk.raw" -device virtio-blk-pci,drive=disk0,serial=roost-demo-disk0,bootindex=0 \
	-drive "if=none,id=cd0,media=cdrom,readonly=on,file=$dir/enroll.iso" -device ide-cd,drive=cd0,bootindex=1 \
	-netdev "user,id=mgmt,hostfwd=tcp:127.0.0.1:$ssh_port-:22" -device "virtio-net-pci,netdev=mgmt,mac=$mac,romfile=" \
	>"$dir/qemu.log" 2>&1 &
vm_pid=$!

deadline=$((t0 + timeout))
check_alive() {
	kill -0 "$vm_pid" 2>/dev/null || { tail -5 "$dir/qemu.log" >&2; die "QEMU exited (see $dir/qemu.log)"; }
	kill -0 "$hub_pid" 2>/dev/null || { tail -20 "$dir/hub.log" >&2; die "the hub exited (see $dir/hub.log)"; }
	[ "$(date +%s)" -lt "$deadline" ] || die "gave up after ${timeout}s (ROOST_DEMO_TIMEOUT); console: $dir/console.log, hub log: $dir/hub.log"
}

# ---- 8. enroll, assign, follow ------------------------------------------------
# items of a roostctl -o json answer: a List, or one bare object
items='if .kind == "List" then .items[] else . end'
server= last=
while :; do
	check_alive
	line=$(ctl get servers -o json 2>/dev/null | jq -r "$items | select(.spec.systemUuid == \"$uuid\" or .metadata.name == \"$uuid\") | \"\(.metadata.name) \(.status.state // \"\")\"" 2>/dev/null | head -1 || true)
	if [ -n "$line" ]; then
		server=${line%% *} state=${line#* }
		if [ "$state" != "$last" ]; then
			[ -z "$last" ] && say "Enrolled: the server's agent called home; Server $server"
			say "Server $server: $state"
			last=$state
		fi
		[ "$state" = Available ] && break
	fi
	sleep 3
done

say "Assigning the server to pool demo as demo-1"
echo "\$ bin/roostctl pool assign demo $server --hostname demo-1"
out=$(bin/roostctl pool assign demo "$server" --hostname demo-1 -o json)
machine=$(jq -r '[.. | objects | select(.kind? == "Machine") | .metadata.name] | first // empty' <<<"$out" 2>/dev/null || true)
while [ -z "$machine" ]; do
	check_alive
	machine=$(ctl get machines -o json 2>/dev/null | jq -r "$items | select(.spec.server == \"$server\") | .metadata.name" 2>/dev/null | head -1 || true)
	[ -n "$machine" ] || sleep 2
done
say "Machine $machine claims Server $server"
"$dir/kubecluster" wait-node -kubeconfig "$dir/kube/admin.kubeconfig" -node demo-1 -timeout "${timeout}s" 2>>"$dir/kube.log" |
	while read -r l; do say "Kubernetes: $l"; done &
node_pid=$!

seen=" " rev=0 booted=0 waiting=
while :; do
	check_alive
	m=$(ctl get machine "$machine" -o json 2>/dev/null || true)
	[ -n "$m" ] || { sleep 3; continue; }
	phase=$(jq -r '.status.phase // ""' <<<"$m")
	r=$(jq -r '.status.revision // 0 | tonumber' <<<"$m")
	b=$(jq -r '.status.bootedRevision // 0 | tonumber' <<<"$m")
	if [ "$r" != "$rev" ] && [ "$r" != 0 ]; then say "Revision $r rendered for $server (the agent installs the disk, stages it and reboots when it holds a Lease)"; rev=$r; fi
	if [ "$b" != "$booted" ] && [ "$b" != 0 ]; then say "The server booted revision $b from its disk"; booted=$b; fi
	# what the agent is doing until the Revision boots (the Provisioned condition)
	w=$(jq -r '.status.conditions[]? | select(.type == "Provisioned" and .status != "True") | "\(.reason): \(.message)"' <<<"$m" 2>/dev/null || true)
	if [ -n "$w" ] && [ "$w" != "$waiting" ]; then say "  $w"; waiting=$w; fi
	case "$seen" in *" $phase "*) ;; *)
		[ -n "$phase" ] && say "Machine $machine: $phase" && seen="$seen$phase "
	esac
	[ "$phase" = Ready ] && [ "$r" != 0 ] && [ "$b" = "$r" ] && break
	sleep 3
done
wait "$node_pid" || die "Node demo-1 did not turn Ready (see $dir/kube.log and the console)"
node_pid=
say "Ready: demo-1 runs revision $rev from its disk and is a Ready Kubernetes Node (elapsed since the start of the demo)"

# ---- 9. look around -------------------------------------------------------------
cat <<EOF

Look around (in another terminal):
  export ROOST_CONFIG=$ROOST_CONFIG
  $PWD/bin/roostctl get servers -o wide
  $PWD/bin/roostctl get machines -o wide
  $PWD/bin/roostctl describe machine $machine
  ssh -i $dir/id_ed25519 -p $ssh_port -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null core@127.0.0.1
      (then: hostname; ip -br addr; ip -d link show br-demo; systemd-sysext status; sudo crictl ps)
  $dir/kubecluster wait-node -kubeconfig $dir/kube/admin.kubeconfig -node demo-1   # the Node, Ready
      (the control plane's admin kubeconfig, for kubectl: $dir/kube/admin.kubeconfig)
  tail -f $dir/console.log        # the server's serial console
EOF
if [ "${ROOST_DEMO_WAIT:-1}" != 0 ] && [ -t 0 ]; then
	read -r -p $'\nPress Enter to stop the server and the hub. ' _ || true
fi
