package kube_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/roostfleet/roost/hub/kube"
	"github.com/roostfleet/roost/hub/kube/kubetest"
)

// newClient is the hub's way in: the admin kubeconfig YAML.
func newClient(t *testing.T, env *kubetest.Env) *kube.Client {
	t.Helper()
	c, err := kube.NewClient(env.Kubeconfig, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, error)) time.Duration {
	t.Helper()
	begin := time.Now()
	var last error
	for time.Since(begin) < d {
		ok, err := cond()
		if ok {
			return time.Since(begin)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v (last error: %v)", what, d, last)
	return 0
}

// TestCluster runs the package against one real kube-apiserver with the
// disruption controller.
func TestCluster(t *testing.T) {
	env := kubetest.Start(t, kubetest.WithDisruptionController())
	c := newClient(t, env)
	admin := env.Clientset()

	t.Run("Probe", func(t *testing.T) {
		v, err := c.Probe(t.Context())
		if err != nil || !strings.HasPrefix(v, "v") {
			t.Fatalf("Probe = %q, %v", v, err)
		}
		t.Logf("server version %s", v)
	})
	t.Run("BootstrapRBAC", func(t *testing.T) { testBootstrapRBAC(t, c, admin) })
	// The rest work on objects of their own, side by side.
	t.Run("BootstrapToken", func(t *testing.T) { t.Parallel(); testBootstrapToken(t, env, c, admin) })
	t.Run("Nodes", func(t *testing.T) { t.Parallel(); testNodes(t, c, admin) })
	t.Run("Drain", func(t *testing.T) { t.Parallel(); testDrain(t, c, admin) })
	t.Run("DrainRefusesUnmanagedPods", func(t *testing.T) { t.Parallel(); testDrainUnmanaged(t, c, admin) })
	t.Run("OperatorCordon", func(t *testing.T) { t.Parallel(); testOperatorCordon(t, c, admin) })
}

func testBootstrapRBAC(t *testing.T, c *kube.Client, admin kubernetes.Interface) {
	ctx := t.Context()
	for range 2 { // idempotent
		if err := c.EnsureBootstrapRBAC(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][2]string{
		"kubeadm:kubelet-bootstrap":                     {"system:node-bootstrapper", "system:bootstrappers:kubeadm:default-node-token"},
		"kubeadm:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers:kubeadm:default-node-token"},
		"kubeadm:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	}
	check := func() {
		t.Helper()
		for name, w := range want {
			b, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != w[0] || len(b.Subjects) != 1 ||
				b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != w[1] {
				t.Fatalf("%s: roleRef %+v subjects %+v; want %v", name, b.RoleRef, b.Subjects, w)
			}
		}
	}
	check()

	// Repair: wrong subjects are replaced, a wrong roleRef recreated.
	b, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, "kubeadm:kubelet-bootstrap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Subjects = []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "mallory"}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, "kubeadm:node-autoapprove-bootstrap", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-autoapprove-bootstrap"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:bootstrappers:kubeadm:default-node-token"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBootstrapRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	check()
}

// csrRequest is a kubelet's TLS bootstrap request for node name.
func csrRequest(t *testing.T, node string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// tokenClient authenticates with nothing but the bootstrap token, as a
// kubelet's bootstrap kubeconfig does.
func tokenClient(t *testing.T, env *kubetest.Env, id, secret string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{
		Host:            env.URL,
		BearerToken:     id + "." + secret,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.CAPEM},
		Timeout:         5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func postCSR(ctx context.Context, cs kubernetes.Interface, name string, req []byte) (*certv1.CertificateSigningRequest, error) {
	return cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    req,
			SignerName: certv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
}

func testBootstrapToken(t *testing.T, env *kubetest.Env, c *kube.Client, admin kubernetes.Interface) {
	ctx := t.Context()
	if err := c.EnsureBootstrapRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	// An expired token first, then a valid one: once the API server's
	// Secret informer has the valid one it has the expired one too.
	oldID, oldSecret, err := kube.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateBootstrapToken(ctx, oldID, oldSecret, time.Now().Add(-time.Minute), "expired"); err != nil {
		t.Fatal(err)
	}
	id, secret, err := kube.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(time.Hour)
	if err := c.CreateBootstrapToken(ctx, id, secret, expires, "worker-1 join"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateBootstrapToken(ctx, id, secret, expires, "worker-1 join"); err != nil {
		t.Fatalf("creating the same token again: %v", err)
	}
	// A kubeadm token the hub must not list.
	_, err = admin.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
		Type:       "bootstrap.kubernetes.io/token",
		StringData: map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateBootstrapToken(ctx, "abcdef", "0123456789abcdef", expires, ""); err == nil {
		t.Fatal("CreateBootstrapToken overwrote a token the hub did not create")
	}

	toks, err := c.ListBootstrapTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []kube.Token{
		{ID: oldID, Expires: time.Now().Add(-time.Minute).Truncate(time.Second), Description: "expired"},
		{ID: id, Expires: expires.Truncate(time.Second), Description: "worker-1 join"},
	}
	slices.SortFunc(want, func(a, b kube.Token) int { return strings.Compare(a.ID, b.ID) })
	if len(toks) != 2 || toks[0].ID != want[0].ID || toks[1].ID != want[1].ID ||
		toks[0].Description != want[0].Description || toks[1].Description != want[1].Description {
		t.Fatalf("ListBootstrapTokens = %+v, want %+v", toks, want)
	}
	for i := range toks {
		if d := toks[i].Expires.Sub(want[i].Expires); d < -2*time.Second || d > 2*time.Second {
			t.Fatalf("token %s expires %v, want %v", toks[i].ID, toks[i].Expires, want[i].Expires)
		}
	}

	// TLS bootstrap as a kubelet does it, with the token only.
	bootstrap := tokenClient(t, env, id, secret)
	var csr *certv1.CertificateSigningRequest
	took := eventually(t, 10*time.Second, "CSR with the bootstrap token", func() (bool, error) {
		csr, err = postCSR(ctx, bootstrap, "worker-1", csrRequest(t, "worker-1"))
		return err == nil, err
	})
	t.Logf("bootstrap token accepted after %v", took.Round(time.Millisecond))
	if csr.Spec.Username != "system:bootstrap:"+id ||
		!slices.Contains(csr.Spec.Groups, "system:bootstrappers") ||
		!slices.Contains(csr.Spec.Groups, kube.BootstrapTokenGroup) {
		t.Fatalf("CSR made by %q in %v", csr.Spec.Username, csr.Spec.Groups)
	}
	// Without the RBAC a bootstrap token may do nothing else.
	if _, err := bootstrap.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bootstrap token listing secrets: %v, want Forbidden", err)
	}

	// The expired token is refused.
	_, err = postCSR(ctx, tokenClient(t, env, oldID, oldSecret), "worker-2", csrRequest(t, "worker-2"))
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("expired token: %v, want Unauthorized", err)
	}

	// A deleted token is refused once the API server's informer saw it go
	// and its cache of successful authentications (10 s) forgot it.
	if err := c.DeleteBootstrapToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteBootstrapToken(ctx, id); err != nil {
		t.Fatalf("deleting a deleted token: %v", err)
	}
	took = eventually(t, 20*time.Second, "deleted token refused", func() (bool, error) {
		_, err := postCSR(ctx, bootstrap, "worker-1", csrRequest(t, "worker-1"))
		return apierrors.IsUnauthorized(err), err
	})
	t.Logf("deleted token refused after %v", took.Round(time.Millisecond))
	toks, err = c.ListBootstrapTokens(ctx)
	if err != nil || len(toks) != 1 || toks[0].ID != oldID {
		t.Fatalf("ListBootstrapTokens after delete = %+v, %v", toks, err)
	}
}

// createNode makes a Node as a kubelet would, with status Ready.
func createNode(t *testing.T, admin kubernetes.Interface, name, providerID string, ready corev1.ConditionStatus, unschedulable bool) {
	t.Helper()
	ctx := t.Context()
	n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Unschedulable: unschedulable},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := "kubelet is posting ready status"
	reason := "KubeletReady"
	if ready != corev1.ConditionTrue {
		reason, msg = "KubeletNotReady", "container runtime network not ready"
	}
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: ready, Reason: reason, Message: msg,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	n.Status.NodeInfo.KubeletVersion = "v1.34.4"
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testNodes(t *testing.T, c *kube.Client, admin kubernetes.Interface) {
	ctx := t.Context()
	s1, s2 := "6f1c2d7e-0000-4000-8000-000000000001", "6f1c2d7e-0000-4000-8000-000000000002"
	createNode(t, admin, "nodes-b", kube.ProviderID(s1), corev1.ConditionTrue, false)
	createNode(t, admin, "nodes-a", kube.ProviderID(s2), corev1.ConditionFalse, true)
	createNode(t, admin, "nodes-cp", "", corev1.ConditionTrue, false)
	createNode(t, admin, "nodes-aws", "aws:///eu-west-1a/i-0123", corev1.ConditionTrue, false)

	list := func() []kube.Node {
		t.Helper()
		nodes, err := c.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []kube.Node // other subtests' nodes do not count
		for _, n := range nodes {
			if strings.HasPrefix(n.Name, "nodes-") {
				out = append(out, n)
			}
		}
		return out
	}
	want := []kube.Node{
		{Name: "nodes-a", Server: s2, KubeletVersion: "v1.34.4", Ready: false,
			ReadyMessage: "KubeletNotReady: container runtime network not ready", Unschedulable: true},
		{Name: "nodes-b", Server: s1, KubeletVersion: "v1.34.4", Ready: true,
			ReadyMessage: "KubeletReady: kubelet is posting ready status"},
	}
	if got := list(); !slices.Equal(got, want) {
		t.Fatalf("ListNodes:\n got %+v\nwant %+v", got, want)
	}
	if err := c.DeleteNode(ctx, "nodes-b"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNode(ctx, "nodes-b"); err != nil {
		t.Fatalf("deleting a deleted node: %v", err)
	}
	if got := list(); !slices.Equal(got, want[:1]) {
		t.Fatalf("ListNodes after delete:\n got %+v\nwant %+v", got, want[:1])
	}
}

// fakeKubelet finishes the deletion of the terminating pods of node, as its
// kubelet would once their containers stopped.
func fakeKubelet(t *testing.T, admin kubernetes.Interface, node string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { cancel(); wg.Wait() })
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			pods, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err == nil {
				for _, p := range pods.Items {
					if p.DeletionTimestamp != nil {
						_ = admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
							GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &p.UID}})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// runningPod creates a pod bound to node and marks it Running and Ready,
// as the kubelet would.
func runningPod(t *testing.T, admin kubernetes.Interface, ns, name, node string, labels map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
			Volumes:    []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	p, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	p.Status.StartTime = &now
	p, err = admin.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func controllerRef(kind, apiVersion, name string, uid types.UID) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

// budgetedPod makes namespace ns with a Roost Node, a ReplicaSet's pod
// running on it guarded by a PodDisruptionBudget of minAvailable 1, and a
// DaemonSet's pod there too. No controller runs for either: the pods stay.
func budgetedPod(t *testing.T, admin kubernetes.Interface, ns, node string) (web *corev1.Pod, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	ctx := t.Context()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNode(t, admin, node, kube.ProviderID(node+"-server"), corev1.ConditionTrue, false)
	replicas := int32(1)
	rs, err := admin.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := admin.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/agent:1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web = runningPod(t, admin, ns, "web-x1", node, map[string]string{"app": "web"}, controllerRef("ReplicaSet", "apps/v1", rs.Name, rs.UID))
	runningPod(t, admin, ns, "agent-x1", node, map[string]string{"app": "agent"}, controllerRef("DaemonSet", "apps/v1", ds.Name, ds.UID))

	minAvailable := intstr.FromInt32(1)
	pdb, err = admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-budget"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return web, pdb
}

func testDrain(t *testing.T, c *kube.Client, admin kubernetes.Interface) {
	ctx := t.Context()
	const ns, node = "drain", "drain-w1"
	web, pdb := budgetedPod(t, admin, ns, node)
	took := eventually(t, 20*time.Second, "disruption controller computes the budget", func() (bool, error) {
		p, err := admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1 && p.Status.DesiredHealthy == 1, err
	})
	t.Logf("budget status written by the disruption controller after %v", took.Round(time.Millisecond))

	// The budget allows no disruption: the drain times out naming it.
	const timeout = 8 * time.Second
	begin := time.Now()
	err := c.Drain(ctx, node, timeout, "lease 7")
	took = time.Since(begin)
	t.Logf("blocked drain returned after %v: %v", took.Round(time.Millisecond), err)
	var de *kube.DrainError
	if !errors.As(err, &de) {
		t.Fatalf("Drain = %v, want a *DrainError", err)
	}
	if took < timeout-time.Second || took > timeout+2*time.Second {
		t.Fatalf("blocked drain took %v, want about %v", took, timeout)
	}
	if !de.TimedOut || len(de.Pods) != 1 || de.Pods[0].Name != web.Name || de.Pods[0].Namespace != ns ||
		de.Pods[0].Budget != pdb.Name || !strings.Contains(de.Pods[0].Reason, "needs 1 healthy pods and has 1 currently") {
		t.Fatalf("DrainError = %+v", de)
	}
	if !strings.Contains(err.Error(), "pod drain/web-x1 blocked by PodDisruptionBudget web-budget") {
		t.Fatalf("DrainError message %q does not name the pod and the budget", err)
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Annotations[kube.CordonAnnotation] != "lease 7" {
		t.Fatalf("after a failed drain: unschedulable %v, annotations %v; want cordoned by Roost", n.Spec.Unschedulable, n.Annotations)
	}
	if _, err := admin.CoreV1().Pods(ns).Get(ctx, web.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the budget's pod: %v", err)
	}

	// Relax the budget; with a kubelet finishing terminations the drain
	// completes.
	pdb, err = admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := intstr.FromInt32(0)
	pdb.Spec.MinAvailable = &zero
	if _, err := admin.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "budget allows a disruption", func() (bool, error) {
		p, err := admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 1, err
	})
	// Evicted, but no kubelet finishes the pod's termination: the drain
	// times out saying so.
	begin = time.Now()
	err = c.Drain(ctx, node, 2*time.Second, "lease 8")
	t.Logf("drain without a kubelet returned after %v: %v", time.Since(begin).Round(time.Millisecond), err)
	if !errors.As(err, &de) || !de.TimedOut || len(de.Pods) != 1 || de.Pods[0].Name != web.Name ||
		de.Pods[0].Budget != "" || de.Pods[0].Reason != "evicted, not terminated yet" {
		t.Fatalf("Drain = %v, want a *DrainError with %s evicted, not terminated", err, web.Name)
	}
	fakeKubelet(t, admin, node)
	begin = time.Now()
	if err := c.Drain(ctx, node, 30*time.Second, "lease 8"); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	t.Logf("drain succeeded in %v", time.Since(begin).Round(time.Millisecond))
	pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}
	if !slices.Equal(left, []string{"agent-x1"}) {
		t.Fatalf("pods left after drain: %v, want only the DaemonSet's", left)
	}
	n, err = admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Annotations[kube.CordonAnnotation] != "lease 8" {
		t.Fatalf("after drain: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	nodes, err := c.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(nodes, func(n kube.Node) bool { return n.Name == node })
	if i < 0 || !nodes[i].CordonedByRoost || nodes[i].CordonReason != "lease 8" || !nodes[i].Unschedulable {
		t.Fatalf("ListNodes: %+v", nodes)
	}

	// Uncordon undoes Roost's cordon, and is idempotent.
	for range 2 {
		if err := c.Uncordon(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	n, err = admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Annotations[kube.CordonAnnotation]; n.Spec.Unschedulable || ok {
		t.Fatalf("after Uncordon: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if err := c.Uncordon(ctx, "no-such-node"); !apierrors.IsNotFound(err) {
		t.Fatalf("Uncordon of a missing node: %v, want NotFound", err)
	}
}

func testDrainUnmanaged(t *testing.T, c *kube.Client, admin kubernetes.Interface) {
	ctx := t.Context()
	const node = "drain-w2"
	createNode(t, admin, node, kube.ProviderID("drain-server-2"), corev1.ConditionTrue, false)
	runningPod(t, admin, "default", "bare", node, nil, nil)
	begin := time.Now()
	err := c.Drain(ctx, node, 10*time.Second, "lease 9")
	t.Logf("drain with an unmanaged pod returned after %v: %v", time.Since(begin).Round(time.Millisecond), err)
	var de *kube.DrainError
	if !errors.As(err, &de) || de.TimedOut || !strings.Contains(err.Error(), "declare no controller") ||
		!strings.Contains(err.Error(), "default/bare") {
		t.Fatalf("Drain = %v, want a *DrainError naming the unmanaged pod at once", err)
	}
	if _, err := admin.CoreV1().Pods("default").Get(ctx, "bare", metav1.GetOptions{}); err != nil {
		t.Fatalf("the unmanaged pod: %v", err)
	}
	if err := c.Drain(ctx, "no-such-node", time.Second, "lease 9"); !apierrors.IsNotFound(err) {
		t.Fatalf("Drain of a missing node: %v, want NotFound", err)
	}
}

func testOperatorCordon(t *testing.T, c *kube.Client, admin kubernetes.Interface) {
	ctx := t.Context()
	const node = "operator-cordoned"
	createNode(t, admin, node, kube.ProviderID("op-server"), corev1.ConditionTrue, true)
	if err := c.Drain(ctx, node, 5*time.Second, "lease 10"); err != nil {
		t.Fatal(err)
	}
	if err := c.Uncordon(ctx, node); err != nil {
		t.Fatal(err)
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Annotations[kube.CordonAnnotation]; !n.Spec.Unschedulable || ok {
		t.Fatalf("operator's cordon: unschedulable %v, annotations %v; want it kept and not taken over", n.Spec.Unschedulable, n.Annotations)
	}
}

// TestWithoutControllerManager: a cluster whose controllers do not run,
// then whose API server is down.
func TestWithoutControllerManager(t *testing.T) {
	env := kubetest.Start(t)
	c := newClient(t, env)
	admin := env.Clientset()

	// Nobody computes the budget's status: the Eviction API answers 429
	// "still being processed" with Retry-After 10, which client-go retries
	// by itself. Drain still returns on time, naming the budget.
	t.Run("DrainBoundedWhenBudgetUnprocessed", func(t *testing.T) {
		web, pdb := budgetedPod(t, admin, "unprocessed", "unprocessed-w1")
		const timeout = 3 * time.Second
		begin := time.Now()
		err := c.Drain(t.Context(), "unprocessed-w1", timeout, "lease 1")
		took := time.Since(begin)
		t.Logf("drain returned after %v: %v", took.Round(time.Millisecond), err)
		var de *kube.DrainError
		if !errors.As(err, &de) || !de.TimedOut || took > timeout+2*time.Second {
			t.Fatalf("Drain = %v after %v, want a timed-out *DrainError within %v", err, took, timeout+2*time.Second)
		}
		if len(de.Pods) != 1 || de.Pods[0].Name != web.Name || de.Pods[0].Budget != pdb.Name ||
			!strings.Contains(de.Pods[0].Reason, "is still being processed") {
			t.Fatalf("DrainError = %+v", de)
		}
	})

	t.Run("APIDown", func(t *testing.T) {
		if _, err := c.Probe(t.Context()); err != nil {
			t.Fatal(err)
		}
		env.StopAPIServer()
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		begin := time.Now()
		_, err := c.Probe(ctx)
		t.Logf("Probe with the API server down: %v after %v", err, time.Since(begin).Round(time.Millisecond))
		if err == nil || !strings.Contains(err.Error(), env.URL) {
			t.Fatalf("Probe = %v, want an error naming %s", err, env.URL)
		}
		if _, err := c.ListNodes(ctx); err == nil {
			t.Fatal("ListNodes succeeded with the API server down")
		}
	})
}
