// Package clusters is the hub's leader-only Kubernetes integration. For
// every Cluster with credentials (spec.kubeconfig) the Controller, each
// tick:
//
//   - probes the API and records status (Reachable, server version, node
//     counts) when it changed;
//   - ensures kubeadm's bootstrap RBAC and keeps one live bootstrap token
//     (Secret kube-system/bootstrap-token-<id>) per worker Machine whose
//     Node has not registered, rotating it at two thirds of its lifetime
//     and deleting it once used (the Node registered) or expired;
//   - maps Nodes to Machines by spec.providerID ("roost://<server>") and
//     records each worker's node name and NodeReady condition;
//   - deletes the Node of a Machine that is gone (Destroyed);
//   - uncordons Nodes it cordoned once their reboot Lease is settled.
//
// It also implements api.Drainer: before a worker's reboot Lease moves
// from Draining to Granted the Node is cordoned and drained
// (k8s.io/kubectl/pkg/drain through hub/kube, PodDisruptionBudgets
// honoured, bounded by spec.drainTimeout); while the cluster API is
// unreachable no worker of that cluster gets a Lease.
//
// All writes go through Raft commands (UpdateClusterStatus,
// UpdateMachineClusterStatus, PutBootstrapToken, DeleteBootstrapTokens),
// proposed only when something changed, so a steady fleet costs no Raft
// entries.
package clusters
