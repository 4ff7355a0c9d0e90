package hub_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roostfleet/roost/cli/printers"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/kube"
	"github.com/roostfleet/roost/hub/kube/kubetest"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// kubeFixture is a single-member hub connected to a real kube-apiserver
// (and kube-controller-manager's disruption controller) as Cluster "prod",
// with Pool "workers" of that cluster.
type kubeFixture struct {
	*agentFixture
	env *kubetest.Env
	cs  kubernetes.Interface
	// offset shifts the cluster controller's clock.
	offset atomic.Int64
}

func newKubeFixture(t *testing.T) *kubeFixture {
	env := kubetest.Start(t, kubetest.WithDisruptionController())
	kf := &kubeFixture{env: env, cs: env.Clientset()}
	h := startHub(t, t.TempDir(), hub.Options{ClusterSyncInterval: 200 * time.Millisecond,
		ControllerClock: func() time.Time { return time.Now().Add(time.Duration(kf.offset.Load())) }})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	cfg, _ := client.LoadConfig(h.AdminConfigPath())
	kf.agentFixture = &agentFixture{t: t, h: h, admin: dial(t, h.AdminConfigPath()), cfg: cfg}
	ctx := context.Background()
	if _, err := kf.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{
			ApiEndpoint: env.URL, CaBundle: string(env.CAPEM), KubernetesVersion: "v1.34.4", Kubeconfig: string(env.Kubeconfig),
			DrainTimeout: durationpb.New(8 * time.Second)}}),
		resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "big"}, Spec: &roostv1.MachineClassSpec{}}),
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{Cluster: "prod", MachineClass: "big"}}),
	}}); err != nil {
		t.Fatal(err)
	}
	return kf
}

// worker enrolls Server id through the API (so it has an agent
// certificate), assigns it to Pool workers and renders Revision 1 for it;
// it returns the agent client and the Machine's name.
func (kf *kubeFixture) worker(id, mac string) (roostv1.AgentServiceClient, string) {
	t := kf.t
	ctx := context.Background()
	req, key := enrollReq(t, kf.token(&roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600}), id, mac)
	resp, err := kf.agentClient(nil, nil).Enroll(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ag := kf.agentClient(resp.GetCertificatePem(), key)
	kf.propose(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: id, Connected: true}}})
	waitFor(t, "Server "+id+" Available", func() bool { return kf.server(id).GetStatus().GetState() == state.ServerAvailable })
	ar, err := kf.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	m := ar.GetMachines()[0].GetMetadata().GetName()
	kf.putRevision(id, m, 1)
	kf.boot(id, 1)
	return ag, m
}

func (kf *kubeFixture) putRevision(id, machine string, n int64) {
	kf.propose(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
		Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: id, Machine: machine, Number: n, ImageVersion: "2026.11.0",
			Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}}, Uid: newUID()}}})
}

// boot reports that id booted Revision n and assessed it healthy.
func (kf *kubeFixture) boot(id string, n int64) {
	kf.propose(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: id, HasBootedRevision: true, BootedRevision: n, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: "True", Reason: "BootAssessed"}}}}})
}

func (kf *kubeFixture) machine(name string) *roostv1.Machine {
	kf.t.Helper()
	o, err := kf.h.FSM().Get("Machine", name)
	if err != nil {
		kf.t.Fatal(err)
	}
	return o.GetMachine()
}

func machineCond(m *roostv1.Machine, typ string) *roostv1.Condition {
	for _, c := range m.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return &roostv1.Condition{}
}

// tokensOf returns the bootstrap tokens the hub holds for machine.
func (kf *kubeFixture) tokensOf(machine string) []*roostv1.BootstrapToken {
	var out []*roostv1.BootstrapToken
	for _, tk := range kf.h.FSM().BootstrapTokens() {
		if tk.GetMachine() == machine {
			out = append(out, tk)
		}
	}
	return out
}

func (kf *kubeFixture) secretExists(id string) bool {
	_, err := kf.cs.CoreV1().Secrets("kube-system").Get(context.Background(), "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		kf.t.Fatal(err)
	}
	return err == nil
}

// registerNode creates the Node a kubelet would, with providerID
// roost://<server>, and sets its Ready condition.
func (kf *kubeFixture) registerNode(name, server string, ready bool) {
	ctx := context.Background()
	n, err := kf.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{ProviderID: kube.ProviderID(server)}}, metav1.CreateOptions{})
	if err != nil {
		kf.t.Fatal(err)
	}
	kf.setNodeReady(n.Name, ready)
}

func (kf *kubeFixture) setNodeReady(name string, ready bool) {
	ctx := context.Background()
	n, err := kf.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		kf.t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := kf.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		kf.t.Fatal(err)
	}
}

// acquire asks for a Lease into revision as the agent until done says the
// answer is final or the deadline passes; it returns the last answer.
func acquire(t *testing.T, ag roostv1.AgentServiceClient, revision int64, within time.Duration, done func(*roostv1.AcquireLeaseResponse) bool) *roostv1.AcquireLeaseResponse {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := ag.AcquireLease(context.Background(), &roostv1.AcquireLeaseRequest{Revision: revision})
		if err != nil {
			t.Fatal(err)
		}
		if done(resp) || time.Now().After(deadline) {
			return resp
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Acceptance 1 and 2: the hub creates a working bootstrap token for a
// worker that has not joined, deletes it after expiry (and makes a new
// one) and once the Node registered; the Node's registration and Ready
// move the Machine to Joined and Ready; deleting the Machine deletes the
// Node.
func TestKubeBootstrapTokenJoinAndNodeLifecycle(t *testing.T) {
	kf := newKubeFixture(t)
	ctx := context.Background()
	const srv = "4c4c4544-0042-3510-8052-00000000000a"
	_, m := kf.worker(srv, "52:54:00:00:00:0a")

	waitFor(t, "Cluster prod Reachable", func() bool {
		o, err := kf.h.FSM().Get("Cluster", "prod")
		return err == nil && machineCondOfCluster(o.GetCluster()) == "True"
	})
	waitFor(t, "a bootstrap token for "+m, func() bool { return len(kf.tokensOf(m)) == 1 })
	tok := kf.tokensOf(m)[0]
	if !kf.secretExists(tok.GetTokenId()) {
		t.Fatalf("Secret bootstrap-token-%s missing", tok.GetTokenId())
	}
	// The agent is handed the token in its desired state.
	if d := kf.h.DesiredState(srv); d.GetKubeletBootstrap().GetToken() != tok.GetTokenId()+"."+tok.GetSecret() || d.GetKubeletBootstrap().GetApiServer() != kf.env.URL {
		t.Errorf("desired kubelet bootstrap %v", d.GetKubeletBootstrap())
	}

	// The token works as kubelet's TLS bootstrap uses it: it creates a
	// CertificateSigningRequest for a node client certificate.
	bootstrap := kubernetes.NewForConfigOrDie(&rest.Config{Host: kf.env.URL, BearerToken: tok.GetTokenId() + "." + tok.GetSecret(),
		TLSClientConfig: rest.TLSClientConfig{CAData: kf.env.CAPEM}})
	csr, err := bootstrap.CertificatesV1().CertificateSigningRequests().Create(ctx, nodeCSR(t, "w1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a CSR with the bootstrap token: %v", err)
	}
	if csr.Spec.Username != "system:bootstrap:"+tok.GetTokenId() {
		t.Errorf("CSR requested by %q", csr.Spec.Username)
	}

	// Past its expiry (the controller's clock moves 2h on), the token is
	// deleted and a new one replaces it.
	kf.offset.Store(int64(2 * time.Hour))
	waitFor(t, "the expired token deleted and replaced", func() bool {
		ts := kf.tokensOf(m)
		return !kf.secretExists(tok.GetTokenId()) && len(ts) == 1 && ts[0].GetTokenId() != tok.GetTokenId()
	})
	tok2 := kf.tokensOf(m)[0]
	kf.offset.Store(0)

	// The kubelet registers: Joined, the used token is deleted; Ready
	// once the Node is.
	kf.registerNode("w1", srv, false)
	waitFor(t, "Machine Joined", func() bool { return machineCond(kf.machine(m), "Joined").GetStatus() == "True" })
	if got := kf.machine(m); got.GetStatus().GetNodeName() != "w1" || machineCond(got, "Ready").GetReason() != "NodeNotReady" {
		t.Fatalf("machine status %v", got.GetStatus())
	}
	waitFor(t, "the used token deleted", func() bool { return len(kf.tokensOf(m)) == 0 && !kf.secretExists(tok2.GetTokenId()) })
	if d := kf.h.DesiredState(srv); d.GetKubeletBootstrap() != nil {
		t.Errorf("joined worker still handed a token")
	}
	kf.setNodeReady("w1", true)
	waitFor(t, "Machine Ready", func() bool { return kf.machine(m).GetStatus().GetPhase() == state.PhaseReady })
	waitFor(t, "Cluster node counts", func() bool {
		o, _ := kf.h.FSM().Get("Cluster", "prod")
		return o.GetCluster().GetStatus().GetNodes() == 1 && o.GetCluster().GetStatus().GetReadyNodes() == 1
	})
	// A second Cluster object naming the same API, and a Node Roost does
	// not know, change nothing: no Node or token of another Cluster is
	// collected.
	if _, err := kf.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod-alias"}, Spec: &roostv1.ClusterSpec{
			ApiEndpoint: kf.env.URL, CaBundle: string(kf.env.CAPEM), Kubeconfig: string(kf.env.Kubeconfig)}})}}); err != nil {
		t.Fatal(err)
	}
	kf.registerNode("stray", "4c4c4544-0042-3510-8052-0000000000ff", true)
	waitFor(t, "Cluster prod-alias Reachable", func() bool {
		o, err := kf.h.FSM().Get("Cluster", "prod-alias")
		return err == nil && machineCondOfCluster(o.GetCluster()) == "True"
	})
	time.Sleep(2 * time.Second) // ten passes of both Clusters
	for _, n := range []string{"w1", "stray"} {
		if _, err := kf.cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("Node %s: %v", n, err)
		}
	}
	if got := kf.machine(m); got.GetStatus().GetNodeName() != "w1" {
		t.Errorf("machine status after the alias Cluster %v", got.GetStatus())
	}

	// Reads never return the credentials.
	got, err := kf.admin.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "prod"})
	if err != nil || got.GetObject().GetCluster().GetSpec().GetKubeconfig() != "" || !got.GetObject().GetCluster().GetStatus().GetCredentialsSet() {
		t.Errorf("Get Cluster = %v, %v", got.GetObject().GetCluster(), err)
	}

	// Destroyed: the Node goes too.
	if _, err := kf.admin.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: "workers", Servers: []string{srv}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Node w1 deleted", func() bool {
		_, err := kf.cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func machineCondOfCluster(c *roostv1.Cluster) string {
	for _, cond := range c.GetStatus().GetConditions() {
		if cond.GetType() == state.ClusterReachable {
			return cond.GetStatus()
		}
	}
	return ""
}

// nodeCSR is the CertificateSigningRequest a kubelet's TLS bootstrap
// creates for node name.
func nodeCSR(t *testing.T, name string) *certificatesv1.CertificateSigningRequest {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{
		CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		}}
}

// Acceptance 3 and 4: a worker's Lease waits for the drain of its Node; a
// PodDisruptionBudget that blocks it makes the drain fail within its
// bound, with the budget named, and no Lease; with the budget satisfied
// the drain succeeds and the Lease follows; after the reboot the Node is
// uncordoned. With the cluster API down no worker gets a Lease and
// `describe machine` says why.
func TestKubeDrainBeforeLeaseAndClusterDown(t *testing.T) {
	kf := newKubeFixture(t)
	ctx := context.Background()
	const srv = "4c4c4544-0042-3510-8052-00000000000b"
	ag, m := kf.worker(srv, "52:54:00:00:00:0b")
	kf.registerNode("w2", srv, true)
	waitFor(t, "Machine Ready", func() bool { return kf.machine(m).GetStatus().GetPhase() == state.PhaseReady })

	// One Running and Ready pod on the Node, covered by a budget that
	// allows no disruption.
	kf.guardedPod("web", "w2")

	// Revision 2 is due: the Lease waits for the drain, which the budget
	// blocks; it fails within the drain timeout (8 s) plus slack, naming
	// the budget; no Lease is held and the Node is schedulable again.
	kf.putRevision(srv, m, 2)
	begin := time.Now()
	resp := acquire(t, ag, 2, 30*time.Second, func(r *roostv1.AcquireLeaseResponse) bool {
		return r.GetGranted() || strings.Contains(r.GetReason(), "drain failed")
	})
	took := time.Since(begin)
	t.Logf("TIMING blocked drain reported after %v: %s", took.Round(100*time.Millisecond), resp.GetReason())
	if resp.GetGranted() || !strings.Contains(resp.GetReason(), "web-pdb") || took > 20*time.Second {
		t.Fatalf("blocked drain: %v after %v", resp, took)
	}
	if c := machineCond(kf.machine(m), "Drained"); c.GetReason() != "DrainBlocked" || !strings.Contains(c.GetMessage(), "web-pdb") {
		t.Errorf("Drained = %v", c)
	}
	if _, err := kf.h.FSM().Get("Lease", srv); err == nil {
		t.Errorf("a Lease is held after the failed drain")
	}
	if n, _ := kf.cs.CoreV1().Nodes().Get(ctx, "w2", metav1.GetOptions{}); n.Spec.Unschedulable {
		t.Errorf("Node still cordoned after the failed drain")
	}

	// The budget allows a disruption now: drained, then the Lease. A
	// kubelet would finish the evicted pod's termination; without one the
	// test does (DESIGN.md §5: evicted pods never finish terminating).
	fakeKubelet(t, kf.cs, "w2")
	kf.allowDisruption("web")
	begin = time.Now()
	resp = acquire(t, ag, 2, 30*time.Second, func(r *roostv1.AcquireLeaseResponse) bool { return r.GetGranted() })
	t.Logf("TIMING drain and Lease after %v", time.Since(begin).Round(100*time.Millisecond))
	if !resp.GetGranted() {
		t.Fatalf("no Lease after the budget allowed the drain: %v", resp)
	}
	if c := machineCond(kf.machine(m), "Drained"); c.GetStatus() != "True" {
		t.Errorf("Drained = %v", c)
	}
	if n, _ := kf.cs.CoreV1().Nodes().Get(ctx, "w2", metav1.GetOptions{}); !n.Spec.Unschedulable {
		t.Errorf("Node not cordoned while the Lease is held")
	}
	// The Server reboots into 2 healthy: the Lease settles and the Node
	// is uncordoned.
	kf.boot(srv, 2)
	waitFor(t, "Node uncordoned after the reboot", func() bool {
		n, err := kf.cs.CoreV1().Nodes().Get(ctx, "w2", metav1.GetOptions{})
		return err == nil && !n.Spec.Unschedulable
	})

	// The cluster API goes down: Revision 3 gets no Lease, and the
	// Machine says why.
	kf.env.StopAPIServer()
	kf.putRevision(srv, m, 3)
	resp = acquire(t, ag, 3, 15*time.Second, func(*roostv1.AcquireLeaseResponse) bool { return true })
	if resp.GetGranted() || !strings.Contains(resp.GetReason(), "unreachable") {
		t.Fatalf("cluster down: %v", resp)
	}
	if _, err := kf.h.FSM().Get("Lease", srv); err == nil {
		t.Errorf("a Lease is held while the cluster API is down")
	}
	var out strings.Builder
	o, err := kf.admin.Get(ctx, &roostv1.GetRequest{Kind: "Machine", Name: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := printers.Describe(&out, o.GetObject(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ClusterUnreachable") || !strings.Contains(out.String(), "unreachable") {
		t.Errorf("describe machine does not say why:\n%s", out.String())
	}
	t.Logf("describe machine:\n%s", out.String())
}

// guardedPod creates pod APP-0 on node, Running and Ready, and budget
// APP-pdb (minAvailable 1) that allows no disruption of it.
func (kf *kubeFixture) guardedPod(app, node string) {
	t, ctx := kf.t, context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: app + "-0", Namespace: "default", Labels: map[string]string{"app": app},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app, UID: types.UID(newUID()), Controller: ptrTrue()}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: app, Image: "registry.invalid/" + app + ":1"}}}}
	pod, err := kf.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := kf.cs.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := kf.cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app + "-pdb", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the budget's status", func() bool {
		p, err := kf.cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, app+"-pdb", metav1.GetOptions{})
		return err == nil && p.Status.CurrentHealthy == 1 && p.Status.ObservedGeneration == p.Generation
	})
}

// allowDisruption sets budget APP-pdb to minAvailable 0 and waits until
// the disruption controller allows one.
func (kf *kubeFixture) allowDisruption(app string) {
	t, ctx := kf.t, context.Background()
	zero := intstr.FromInt32(0)
	p, err := kf.cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, app+"-pdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.MinAvailable = &zero
	if _, err := kf.cs.PolicyV1().PodDisruptionBudgets("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the budget allows a disruption", func() bool {
		p, err := kf.cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, app+"-pdb", metav1.GetOptions{})
		return err == nil && p.Status.DisruptionsAllowed == 1 && p.Status.ObservedGeneration == p.Generation
	})
}

// podExists says whether pod NAME exists in namespace default.
func (kf *kubeFixture) podExists(name string) bool {
	_, err := kf.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		kf.t.Fatal(err)
	}
	return err == nil
}

// A worker's Node is cordoned and drained before its Machine is released:
// a budget that blocks the drain makes the unassign fail within the
// Cluster's drainTimeout, naming the budget, with the Machine kept and the
// Node schedulable again; once the budget allows it the pod is evicted
// and the Machine released (and the Node deleted). A forced delete
// releases at once, evicting nothing.
func TestKubeDrainBeforeRelease(t *testing.T) {
	kf := newKubeFixture(t)
	ctx := context.Background()
	const srv, srv2 = "4c4c4544-0042-3510-8052-00000000000c", "4c4c4544-0042-3510-8052-00000000000d"
	_, m := kf.worker(srv, "52:54:00:00:00:0c")
	_, m2 := kf.worker(srv2, "52:54:00:00:00:0d")
	kf.registerNode("w3", srv, true)
	kf.registerNode("w4", srv2, true)
	waitFor(t, "Machines Ready", func() bool {
		return kf.machine(m).GetStatus().GetPhase() == state.PhaseReady && kf.machine(m2).GetStatus().GetPhase() == state.PhaseReady
	})
	kf.guardedPod("api", "w3")
	kf.guardedPod("db", "w4")

	begin := time.Now()
	_, err := kf.admin.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: "workers", Servers: []string{srv}})
	took := time.Since(begin)
	t.Logf("TIMING blocked release refused after %v: %v", took.Round(100*time.Millisecond), err)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "api-pdb") || !strings.Contains(err.Error(), "nothing was released") || took > 25*time.Second {
		t.Fatalf("blocked release: %v after %v", err, took)
	}
	if _, err := kf.h.FSM().Get("Machine", m); err != nil {
		t.Fatalf("Machine released although its drain failed: %v", err)
	}
	if c := machineCond(kf.machine(m), "Drained"); c.GetReason() != "DrainBlocked" || !strings.Contains(c.GetMessage(), "api-pdb") {
		t.Errorf("Drained = %v", c)
	}
	waitFor(t, "Node w3 schedulable again", func() bool {
		n, err := kf.cs.CoreV1().Nodes().Get(ctx, "w3", metav1.GetOptions{})
		return err == nil && !n.Spec.Unschedulable
	})

	fakeKubelet(t, kf.cs, "w3")
	kf.allowDisruption("api")
	begin = time.Now()
	resp, err := kf.admin.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: "workers", Servers: []string{srv}})
	t.Logf("TIMING drain and release after %v", time.Since(begin).Round(100*time.Millisecond))
	if err != nil || len(resp.GetMachines()) != 1 {
		t.Fatalf("release after the budget allowed the drain: %v, %v", resp, err)
	}
	if kf.podExists("api-0") {
		t.Errorf("pod api-0 not evicted before the release")
	}
	waitFor(t, "Node w3 deleted", func() bool {
		_, err := kf.cs.CoreV1().Nodes().Get(ctx, "w3", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// --force: released at once, the guarded pod untouched.
	begin = time.Now()
	if _, err := kf.admin.Delete(ctx, &roostv1.DeleteRequest{Kind: "Machine", Name: m2, Force: true}); err != nil {
		t.Fatalf("forced delete: %v", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("forced delete took %v", took)
	}
	if !kf.podExists("db-0") {
		t.Errorf("a forced delete evicted pod db-0")
	}
}

// fakeKubelet does the one thing of a kubelet drains wait for: pods on
// node that are being deleted are removed (grace 0) until the test ends.
func fakeKubelet(t *testing.T, cs kubernetes.Interface, node string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err == nil {
				for _, p := range pods.Items {
					if p.DeletionTimestamp != nil {
						zero := int64(0)
						_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

func ptrTrue() *bool { b := true; return &b }

func newUID() string { return uuid.NewString() }
