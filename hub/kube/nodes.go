package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderIDPrefix starts the spec.providerID of every Node a Roost machine
// registers: "roost://<server>", where <server> is the Roost Server's ID
// (the kubelet is started with --provider-id).
const ProviderIDPrefix = "roost://"

// ProviderID is the spec.providerID of the Node of server:
// ProviderIDPrefix + server.
func ProviderID(server string) string { return ProviderIDPrefix + server }

// Node is a Kubernetes Node registered by a Roost machine.
type Node struct {
	Name           string // metadata.name, the kubelet's node name
	Server         string // the Roost Server ID, from spec.providerID
	KubeletVersion string // status.nodeInfo.kubeletVersion, e.g. "v1.34.4"
	// Ready is condition Ready being True; ReadyMessage is that
	// condition's reason and message ("" when the Node has none yet).
	Ready        bool
	ReadyMessage string
	// Unschedulable is spec.unschedulable (cordoned, by anyone).
	Unschedulable bool
	// CordonedByRoost is whether Drain cordoned the Node (annotation
	// CordonAnnotation present); CordonReason is that annotation's value.
	CordonedByRoost bool
	CordonReason    string
}

// ListNodes returns the Nodes whose spec.providerID starts with
// ProviderIDPrefix, sorted by name; other Nodes (control plane, machines
// Roost does not run) are left out.
func (c *Client) ListNodes(ctx context.Context) ([]Node, error) {
	var out []Node
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("kube: listing nodes: %w", err)
		}
		for i := range list.Items {
			if n, ok := roostNode(&list.Items[i]); ok {
				out = append(out, n)
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// roostNode converts a Node registered by a Roost machine; ok is false for
// any other Node.
func roostNode(n *corev1.Node) (Node, bool) {
	server, ok := strings.CutPrefix(n.Spec.ProviderID, ProviderIDPrefix)
	if !ok || server == "" {
		return Node{}, false
	}
	out := Node{
		Name:           n.Name,
		Server:         server,
		KubeletVersion: n.Status.NodeInfo.KubeletVersion,
		Unschedulable:  n.Spec.Unschedulable,
	}
	out.CordonReason, out.CordonedByRoost = n.Annotations[CordonAnnotation]
	for _, cond := range n.Status.Conditions {
		if cond.Type != corev1.NodeReady {
			continue
		}
		out.Ready = cond.Status == corev1.ConditionTrue
		out.ReadyMessage = cond.Reason
		if cond.Message != "" {
			if out.ReadyMessage != "" {
				out.ReadyMessage += ": "
			}
			out.ReadyMessage += cond.Message
		}
	}
	return out, true
}

// DeleteNode deletes Node name, as when its machine leaves the cluster for
// good. A Node that does not exist is not an error.
func (c *Client) DeleteNode(ctx context.Context, name string) error {
	err := c.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: deleting node %s: %w", name, err)
	}
	return nil
}
