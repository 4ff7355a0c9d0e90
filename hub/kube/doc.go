// Package kube is the hub's client for tenant Kubernetes clusters: the
// clusters whose worker machines Roost runs. It does what the hub needs and
// nothing more:
//
//   - reach a cluster from the credentials an operator gives it (kubeconfig
//     YAML) and check that it answers (Probe);
//   - let new workers join: the RBAC bindings kubeadm creates for kubelet TLS
//     bootstrap (EnsureBootstrapRBAC) and bootstrap tokens in kube-system
//     (CreateBootstrapToken, DeleteBootstrapToken, ListBootstrapTokens);
//   - see the Nodes Roost machines registered, recognised by their
//     spec.providerID "roost://<server>" (ListNodes, DeleteNode);
//   - cordon and drain a Node before its machine reboots, through the
//     Eviction API so PodDisruptionBudgets hold (Drain), and undo a cordon
//     Roost made (Uncordon), never one an operator made.
//
// Every call is bounded by the Client's request timeout and by its context.
// Errors are prefixed "kube: " and wrap the client-go error, so callers can
// use k8s.io/apimachinery/pkg/api/errors predicates on them; a drain that
// cannot finish returns a *DrainError naming the pods that block it and why.
//
// Package hub/kube/kubetest runs a real kube-apiserver for the tests.
package kube
