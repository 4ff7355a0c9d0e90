package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

func TestNewClientErrors(t *testing.T) {
	for _, tc := range []struct {
		name, kubeconfig, want string
	}{
		{"empty", "", "kubeconfig is empty"},
		{"not yaml", "{{{", "parsing kubeconfig"},
		{"no current context", "apiVersion: v1\nkind: Config\nclusters: []\n", "kubeconfig: no current-context"},
		{"missing context", "apiVersion: v1\nkind: Config\ncurrent-context: nope\n", `current-context "nope" is not among its contexts`},
		{"missing user", `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://10.0.0.1:6443"}}]
`, `context "c" names user "u", which it does not define`},
		{"bad CA file", `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://10.0.0.1:6443", certificate-authority: /nonexistent/ca.crt}}]
users: [{name: u, user: {token: abc}}]
`, "/nonexistent/ca.crt"},
		{"cluster without server", `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {}}]
users: [{name: u, user: {token: abc}}]
`, `cluster "k" has no server`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewClient([]byte(tc.kubeconfig), time.Second)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "kube: ") {
				t.Fatalf("NewClient: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	good := `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {token: abc}}]
`
	if _, err := NewClient([]byte(good), -time.Second); err == nil {
		t.Fatal("NewClient accepted a negative timeout")
	}
	c, err := NewClient([]byte(good), 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Host() != "https://10.0.0.1:6443" || c.config.Timeout != DefaultTimeout || c.config.BearerToken != "abc" {
		t.Fatalf("client config: host %q timeout %v token %q", c.Host(), c.config.Timeout, c.config.BearerToken)
	}
}

func TestGenerateToken(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		id, secret, err := GenerateToken()
		if err != nil {
			t.Fatal(err)
		}
		if !bootstraputil.IsValidBootstrapToken(id+"."+secret) || len(id) != 6 || len(secret) != 16 {
			t.Fatalf("GenerateToken = %q, %q: not a bootstrap token", id, secret)
		}
		if seen[id] {
			t.Fatalf("GenerateToken repeated id %q", id)
		}
		seen[id] = true
	}
}

func TestRoostNode(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", Annotations: map[string]string{CordonAnnotation: "lease 3"}},
		Spec:       corev1.NodeSpec{ProviderID: ProviderID("0b3c"), Unschedulable: true},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime is down"},
		}},
	}
	got, ok := roostNode(n)
	want := Node{Name: "w1", Server: "0b3c", Ready: false, ReadyMessage: "KubeletNotReady: container runtime is down",
		Unschedulable: true, CordonedByRoost: true, CordonReason: "lease 3"}
	if !ok || got != want {
		t.Fatalf("roostNode = %+v, %v; want %+v", got, ok, want)
	}
	for _, pid := range []string{"", "roost://", "aws:///eu-west-1a/i-0abc", "roost:/x"} {
		n.Spec.ProviderID = pid
		if _, ok := roostNode(n); ok {
			t.Errorf("providerID %q taken for a Roost node", pid)
		}
	}
}

// The recorder turns the Eviction API's refusal (as the apiserver builds
// it in pkg/registry/core/pod/storage/eviction.go) into a BlockedPod naming
// the budget.
func TestDrainErrorNamesBudget(t *testing.T) {
	refusal := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	refusal.ErrStatus.Details.Causes = append(refusal.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"})
	rec := &evictionRecorder{errs: map[podKey]error{}, evicted: map[podKey]bool{}, gone: map[podKey]bool{}}
	rec.evict("shop", "web-1", refusal)
	rec.evict("shop", "cache-0", nil) // evicted, never terminated
	rec.evict("shop", "batch-2", nil) // evicted and gone
	rec.finished("shop", "batch-2")   //
	rec.evict("shop", "gone-3", apierrors.NewNotFound(corev1.Resource("pods"), "gone-3"))
	e := &DrainError{Node: "w1", Pods: rec.blocked(), TimedOut: true, Timeout: 10 * time.Second}
	want := "kube: draining node w1: pod shop/cache-0: evicted, not terminated yet; " +
		"pod shop/web-1 blocked by PodDisruptionBudget web-pdb: Cannot evict pod as it would violate the pod's disruption budget. " +
		"The disruption budget web-pdb needs 1 healthy pods and has 1 currently (drain timeout 10s reached)"
	if e.Error() != want {
		t.Fatalf("DrainError:\n got %s\nwant %s", e.Error(), want)
	}
	if e.Pods[1].Budget != "web-pdb" {
		t.Fatalf("Budget = %q", e.Pods[1].Budget)
	}
}
