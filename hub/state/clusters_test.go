package state

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func machineClusterCmd(machine, node string, conds ...*roostv1.Condition) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_UpdateMachineClusterStatus{UpdateMachineClusterStatus: &roostv1.UpdateMachineClusterStatus{
		Machine: machine, NodeName: node, Conditions: conds}}}
}

func getCluster(t *testing.T, f *FSM, name string) *roostv1.Cluster {
	t.Helper()
	o, err := f.Get("Cluster", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetCluster()
}

// spec.kubeconfig is write-only on apply: an apply without it keeps the
// stored one; status.credentials_set follows; observed status survives.
func TestClusterCredentialsKeptOnApply(t *testing.T) {
	h := newHarness(t, Options{})
	withCreds := clusterObj("prod", nil)
	withCreds.GetCluster().Spec.Kubeconfig = "apiVersion: v1\nkind: Config\n"
	h.mustApply(h.objects(withCreds))
	if c := getCluster(t, h.f, "prod"); !c.GetStatus().GetCredentialsSet() || c.GetSpec().GetKubeconfig() == "" {
		t.Fatalf("after create: %v", c)
	}
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_UpdateClusterStatus{UpdateClusterStatus: &roostv1.UpdateClusterStatus{
		Cluster: "prod", Status: &roostv1.ClusterStatus{Nodes: 3, ReadyNodes: 2, ServerVersion: "v1.34.4",
			Conditions: []*roostv1.Condition{{Type: ClusterReachable, Status: "True"}}}}}})

	// Re-applied without credentials, with a new version: kept.
	res := h.mustApply(h.objects(resource.Wrap(&roostv1.Cluster{Metadata: meta("prod", nil), Spec: &roostv1.ClusterSpec{
		ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.5"}})))
	if got := actions(res); len(got) != 1 || got[0] != "Cluster/prod=configured" {
		t.Errorf("actions %v", got)
	}
	c := getCluster(t, h.f, "prod")
	if c.GetSpec().GetKubeconfig() == "" || !c.GetStatus().GetCredentialsSet() || c.GetStatus().GetNodes() != 3 || c.GetSpec().GetKubernetesVersion() != "v1.34.5" {
		t.Fatalf("after re-apply: %v", c)
	}
	// Re-applied unchanged without credentials: unchanged.
	res = h.mustApply(h.objects(resource.Wrap(&roostv1.Cluster{Metadata: meta("prod", nil), Spec: &roostv1.ClusterSpec{
		ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.5"}})))
	if got := actions(res); len(got) != 1 || got[0] != "Cluster/prod=unchanged" {
		t.Errorf("actions %v", got)
	}
	// A status update keeps credentials_set, whatever the command says.
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_UpdateClusterStatus{UpdateClusterStatus: &roostv1.UpdateClusterStatus{
		Cluster: "prod", Status: &roostv1.ClusterStatus{CredentialsSet: false}}}})
	if c := getCluster(t, h.f, "prod"); !c.GetStatus().GetCredentialsSet() || c.GetStatus().GetNodes() != 0 {
		t.Fatalf("after status update: %v", c.GetStatus())
	}
	wantCode(t, h.apply(&roostv1.Command{Command: &roostv1.Command_UpdateClusterStatus{UpdateClusterStatus: &roostv1.UpdateClusterStatus{
		Cluster: "nope"}}}).Err, codes.NotFound)
}

// A worker Machine is Joined once its Node is registered and Ready once
// the Node is Ready and the agent's checks hold.
func TestWorkerJoinedAndReadyFromNode(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...))
	claimedServer(h, uuidA, "52:54:00:00:00:01", "w1", "workers")
	h.mustApply(putRevisionCmd(uuidA, "w1", 1))
	h.mustApply(bootReport(uuidA, 1, "True"))
	m := getMachine(t, h.f, "w1")
	if m.GetStatus().GetCluster() != "prod" || cond(m, MachineJoined) != "False/WaitingForNode" || cond(m, MachineReady) != "False/"+ReasonWaitingForMilestone {
		t.Fatalf("before the Node: %v", m.GetStatus())
	}
	h.mustApply(machineClusterCmd("w1", "w1", &roostv1.Condition{Type: MachineNodeReady, Status: "False", Reason: "KubeletNotReady", Message: "container runtime not ready"}))
	m = getMachine(t, h.f, "w1")
	if cond(m, MachineJoined) != "True/NodeRegistered" || cond(m, MachineReady) != "False/NodeNotReady" || m.GetStatus().GetPhase() != PhaseJoined || m.GetStatus().GetNodeName() != "w1" {
		t.Fatalf("registered: %v", m.GetStatus())
	}
	if msg := findCondition(m.GetStatus().GetConditions(), MachineReady).GetMessage(); msg != "Node w1 is not Ready: container runtime not ready" {
		t.Errorf("Ready message %q", msg)
	}
	h.mustApply(machineClusterCmd("w1", "w1", &roostv1.Condition{Type: MachineNodeReady, Status: "True", Reason: "KubeletReady"}))
	if m = getMachine(t, h.f, "w1"); cond(m, MachineReady) != "True/Healthy" || m.GetStatus().GetPhase() != PhaseReady {
		t.Fatalf("node ready: %v", m.GetStatus())
	}
	// Drained is kept alongside; the Node going away drops NodeReady.
	h.mustApply(machineClusterCmd("w1", "", &roostv1.Condition{Type: MachineDrained, Status: "False", Reason: "ClusterUnreachable", Message: "dial tcp: refused"}))
	m = getMachine(t, h.f, "w1")
	if cond(m, MachineJoined) != "False/WaitingForNode" || cond(m, MachineDrained) != "False/ClusterUnreachable" || findCondition(m.GetStatus().GetConditions(), MachineNodeReady) != nil {
		t.Fatalf("node gone: %v", m.GetStatus())
	}
	wantCode(t, h.apply(machineClusterCmd("w1", "w1", &roostv1.Condition{Type: "Ready", Status: "True"})).Err, codes.InvalidArgument)
	wantCode(t, h.apply(machineClusterCmd("nope", "n")).Err, codes.NotFound)
}

func TestBootstrapTokensPutDeleteSnapshot(t *testing.T) {
	h := newHarness(t, Options{})
	exp := timestamppb.New(t0.Add(time.Hour))
	put := func(id, secret, machine string) *ApplyResult {
		return h.apply(&roostv1.Command{Command: &roostv1.Command_PutBootstrapToken{PutBootstrapToken: &roostv1.PutBootstrapToken{
			Token: &roostv1.BootstrapToken{TokenId: id, Secret: secret, Machine: machine, Cluster: "prod", ExpiresAt: exp}}}})
	}
	if res := put("abcdef", "0123456789abcdef", "w1"); res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := put("ghijkl", "0123456789abcdef", "w2"); res.Err != nil {
		t.Fatal(res.Err)
	}
	e := wantCode(t, put("ABCDEF", "short", "").Err, codes.InvalidArgument)
	if len(e.Violations) != 3 {
		t.Errorf("violations %v", e.Violations)
	}
	if got := h.f.BootstrapTokens(); len(got) != 2 || got[0].GetMachine() != "w1" || got[1].GetSecret() != "0123456789abcdef" {
		t.Fatalf("tokens %v", got)
	}
	restored := restoreNew(t, snapshotBytes(t, h.f))
	if got := restored.BootstrapTokens(); len(got) != 2 {
		t.Fatalf("restored tokens %v", got)
	}
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_DeleteBootstrapTokens{DeleteBootstrapTokens: &roostv1.DeleteBootstrapTokens{TokenIds: []string{"abcdef", "zzzzzz"}}}})
	if got := h.f.BootstrapTokens(); len(got) != 1 || got[0].GetTokenId() != "ghijkl" {
		t.Fatalf("after delete %v", got)
	}
}
