#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, the kubelet and etcd from the Go module
# proxy (versions pinned in hack/testbin/go.mod) into a cache folder that
# survives clean clones, and prints that folder. Tests find it through
# KUBEBUILDER_ASSETS (controller-runtime envtest) or this same default.
#
# Cold: ~10-15 min and ~2 GB of Go build cache; cached: a few seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1=="k8s.io/kubernetes"{print $2}' "$here/go.mod")
etcd=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$here/go.mod")
out=${ROOST_TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/roost/testbin/kubernetes-${version}-etcd-${etcd}}
mkdir -p "$out"
stamp="$out/.stamp"
want="$(cd "$here" && sha256sum go.mod go.sum build.sh | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$out/kube-apiserver" && -x "$out/kube-controller-manager" && -x "$out/kubelet" && -x "$out/etcd" ]]; then
	echo "$out"
	exit 0
fi
cd "$here"
export GOFLAGS=-mod=readonly CGO_ENABLED=0
echo "testbin: building kube-apiserver, kube-controller-manager and kubelet ${version}, etcd ${etcd} into $out (cold: ~15 min)" >&2
# Stamp the version /version reports (kube's own build does this with
# hack/lib/version.sh), so a probe says v1.34.4, not v0.0.0-master.
minor=${version#v1.}; minor=${minor%%.*}
ldflags="-X k8s.io/component-base/version.gitVersion=${version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"
go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -ldflags "$ldflags" -o "$out/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
# The kubelet of worker Machines (shipped to them as a systemd-sysext image):
# static, as Kubernetes releases build it.
go build -trimpath -ldflags "$ldflags -s -w" -o "$out/kubelet" k8s.io/kubernetes/cmd/kubelet
go build -trimpath -o "$out/etcd" go.etcd.io/etcd/server/v3
echo "$want" > "$stamp"
echo "$out"
