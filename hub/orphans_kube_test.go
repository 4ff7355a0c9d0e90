package hub_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roostfleet/roost/cli/printers"
	"github.com/roostfleet/roost/hub/kube"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Issue 20, acceptance 3, against a real kube-apiserver: a Node labelled
// by Roost (providerID roost://…) whose Server no Machine claims is
// deleted; a Roost-labelled bootstrap token Secret the hub does not hold
// is deleted after its grace, and the token of a released Machine that
// never joined is deleted; the Cluster's API becoming unreachable (its
// kubeconfig pointed at a dead address) freezes its Pool with the reason,
// shown by `describe pool` and the FROZEN column, and the Pool unfreezes
// once the API is reachable again.
func TestKubeOrphansAndClusterFreeze(t *testing.T) {
	kf := newKubeFixture(t)
	ctx := context.Background()
	waitFor(t, "Cluster prod Reachable", func() bool {
		o, err := kf.h.FSM().Get("Cluster", "prod")
		return err == nil && machineCondOfCluster(o.GetCluster()) == "True"
	})

	// A worker that never joins holds a bootstrap token; released, its
	// token goes from the cluster and the hub.
	const srv = "4c4c4544-0042-3510-8052-00000000001a"
	_, m := kf.worker(srv, "52:54:00:00:00:1a")
	waitFor(t, "a bootstrap token for "+m, func() bool { return len(kf.tokensOf(m)) == 1 })
	tok := kf.tokensOf(m)[0].GetTokenId()
	if _, err := kf.admin.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: "workers", Servers: []string{srv}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the released Machine's token deleted", func() bool { return len(kf.tokensOf(m)) == 0 && !kf.secretExists(tok) })

	// An orphan Node: the Server is enrolled, no Machine claims it, and a
	// Node names it. The Cluster controller deletes it.
	if _, err := kf.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Spec: corev1.NodeSpec{ProviderID: kube.ProviderID(srv)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "orphan Node deleted", func() bool {
		_, err := kf.cs.CoreV1().Nodes().Get(ctx, "orphan", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// An orphan bootstrap token: labelled by Roost, unknown to the hub.
	// Left alone for its grace (a create racing its record), then deleted.
	const orphanID = "zz9zz9"
	if _, err := kf.cs.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + orphanID, Namespace: "kube-system", Labels: map[string]string{kube.ManagedByLabel: kube.ManagedByValue}},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{"token-id": orphanID, "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true",
			"expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the controller sees it a first time
	if !kf.secretExists(orphanID) {
		t.Fatalf("orphan token deleted before its grace")
	}
	kf.offset.Store(int64(2 * time.Minute))
	waitFor(t, "orphan token deleted", func() bool { return !kf.secretExists(orphanID) })
	kf.offset.Store(0)
	// Both removals are in the operations log of the Cluster.
	waitFor(t, "the orphans' Events on Cluster prod", func() bool {
		objs, _, err := kf.h.FSM().List("Event", "")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, o := range objs {
			if io := o.GetEvent().GetSpec().GetInvolvedObject(); io.GetKind() == "Cluster" && io.GetName() == "prod" {
				seen[o.GetEvent().GetSpec().GetReason()] = true
			}
		}
		return seen["OrphanNodeDeleted"] && seen["OrphanBootstrapTokenDeleted"]
	})

	// The Cluster's API goes away: its kubeconfig now names a dead
	// address. The Pool freezes, saying why.
	dead := bytes.ReplaceAll(kf.env.Kubeconfig, []byte(kf.env.URL), []byte("https://127.0.0.1:1"))
	if bytes.Equal(dead, kf.env.Kubeconfig) {
		t.Fatalf("kubeconfig does not name %s", kf.env.URL)
	}
	kf.setKubeconfig(dead)
	waitFor(t, "Pool workers Frozen", func() bool {
		return poolCond(kf, "workers", state.PoolFrozen).GetReason() == state.ReasonClusterUnreachable
	})
	c := poolCond(kf, "workers", state.PoolFrozen)
	if c.GetStatus() != "True" || !strings.Contains(c.GetMessage(), "Cluster prod") {
		t.Errorf("Frozen = %v", c)
	}
	o, err := kf.admin.Get(ctx, &roostv1.GetRequest{Kind: "Pool", Name: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := printers.Describe(&out, o.GetObject(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Frozen") || !strings.Contains(out.String(), state.ReasonClusterUnreachable) {
		t.Errorf("describe pool does not say it is frozen:\n%s", out.String())
	}
	out.Reset()
	if err := printers.PrintTable(&out, []*roostv1.Object{o.GetObject()}, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "FROZEN") || !strings.Contains(out.String(), state.ReasonClusterUnreachable) {
		t.Errorf("get pools does not show it frozen:\n%s", out.String())
	}

	// The API is back: the Pool unfreezes by itself.
	kf.setKubeconfig(kf.env.Kubeconfig)
	waitFor(t, "Pool workers unfrozen", func() bool { return poolCond(kf, "workers", state.PoolFrozen) == nil })
}

// setKubeconfig applies Cluster prod again with kubeconfig kc.
func (kf *kubeFixture) setKubeconfig(kc []byte) {
	kf.t.Helper()
	if _, err := kf.admin.Apply(context.Background(), &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{
			ApiEndpoint: kf.env.URL, CaBundle: string(kf.env.CAPEM), KubernetesVersion: "v1.34.4", Kubeconfig: string(kc)}}),
	}}); err != nil {
		kf.t.Fatal(err)
	}
}

// poolCond is Pool pool's condition typ, nil when it has none.
func poolCond(kf *kubeFixture, pool, typ string) *roostv1.Condition {
	o, err := kf.h.FSM().Get("Pool", pool)
	if err != nil {
		kf.t.Fatal(err)
	}
	return state.FindCondition(o.GetPool().GetStatus().GetConditions(), typ)
}
