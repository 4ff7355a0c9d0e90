//go:build tools

// Package testbin records the main packages `make testbin` builds so that
// `go mod tidy` keeps their dependencies.
package testbin

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
