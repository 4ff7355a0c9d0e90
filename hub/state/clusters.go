package state

import (
	"fmt"
	"regexp"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Machine conditions the leader observes in a worker's Cluster (written by
// UpdateMachineClusterStatus; other condition types are refused there).
const (
	// MachineNodeReady mirrors the Node's Ready condition.
	MachineNodeReady = "NodeReady"
	// MachineDrained says whether the worker's Node was cordoned and
	// drained for its reboot Lease, and why not (DrainBlocked,
	// ClusterUnreachable, …).
	MachineDrained = "Drained"
	// ClusterReachable is the Cluster condition saying the hub's
	// credentials reach the cluster's API.
	ClusterReachable = "Reachable"
)

const (
	kindCluster          = "Cluster"
	tableBootstrapTokens = "bootstrap_tokens"
)

// Lease phases (LeaseSpec.phase).
const (
	LeaseDraining = "Draining"
	LeaseGranted  = "Granted"
)

var (
	bootstrapTokenIDRE     = regexp.MustCompile(`^[a-z0-9]{6}$`)
	bootstrapTokenSecretRE = regexp.MustCompile(`^[a-z0-9]{16}$`)
)

// clusterCredentials makes spec.kubeconfig write-only on apply: an applied
// Cluster without one keeps the stored one. It returns in, or a clone of
// in carrying the stored kubeconfig.
func clusterCredentials(in, old *roostv1.Cluster) *roostv1.Cluster {
	if in.GetSpec().GetKubeconfig() != "" || old.GetSpec().GetKubeconfig() == "" {
		return in
	}
	c := proto.Clone(in).(*roostv1.Cluster)
	if c.Spec == nil {
		c.Spec = &roostv1.ClusterSpec{}
	}
	c.Spec.Kubeconfig = old.GetSpec().GetKubeconfig()
	return c
}

// markCredentials sets status.credentials_set from spec.kubeconfig.
func markCredentials(c *roostv1.Cluster) {
	set := c.GetSpec().GetKubeconfig() != ""
	if c.GetStatus().GetCredentialsSet() == set {
		return
	}
	if c.Status == nil {
		c.Status = &roostv1.ClusterStatus{}
	} else {
		c.Status = proto.Clone(c.Status).(*roostv1.ClusterStatus)
	}
	c.Status.CredentialsSet = set
}

func (a *applier) getCluster(name string) (*roostv1.Cluster, *apierror.Error) {
	raw, err := a.txn.First(kindCluster, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetCluster(), nil
}

// updateClusterStatus replaces a Cluster's observed status, keeping
// credentials_set (see roostv1.UpdateClusterStatus). NotFound when the
// Cluster is gone.
func (a *applier) updateClusterStatus(c *roostv1.UpdateClusterStatus) *apierror.Error {
	old, aerr := a.getCluster(c.GetCluster())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindCluster, c.GetCluster())
	}
	cl := proto.Clone(old).(*roostv1.Cluster)
	st := proto.Clone(c.GetStatus()).(*roostv1.ClusterStatus)
	if st == nil {
		st = &roostv1.ClusterStatus{}
	}
	st.CredentialsSet = old.GetStatus().GetCredentialsSet()
	cl.Status = st
	if proto.Equal(cl, old) {
		return nil
	}
	a.touch(cl.Metadata, false)
	return a.put(cl, false)
}

// updateMachineClusterStatus records a worker's Node name and its
// cluster-decided conditions (NodeReady, Drained), then recomputes the
// Machine's milestones. NotFound when the Machine is gone; Invalid for
// other condition types.
func (a *applier) updateMachineClusterStatus(c *roostv1.UpdateMachineClusterStatus) *apierror.Error {
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	for i, cond := range c.GetConditions() {
		if t := cond.GetType(); t != MachineNodeReady && t != MachineDrained {
			return apierror.Invalid("invalid Machine cluster status", apierror.Violation{
				Field: fmt.Sprintf("conditions[%d].type", i), Message: fmt.Sprintf("must be %s or %s, got %q", MachineNodeReady, MachineDrained, t)})
		}
	}
	old, aerr := a.getMachine(c.GetMachine())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindMachine, c.GetMachine())
	}
	m := proto.Clone(old).(*roostv1.Machine)
	if m.Status == nil {
		m.Status = &roostv1.MachineStatus{}
	}
	m.Status.NodeName = c.GetNodeName()
	for _, cond := range c.GetConditions() {
		m.Status.Conditions = setCondition(m.Status.Conditions, cond.GetType(), cond.GetStatus(), cond.GetReason(), cond.GetMessage(), now)
	}
	if m.GetStatus().GetNodeName() == "" {
		m.Status.Conditions = removeCondition(m.Status.Conditions, MachineNodeReady)
	}
	if aerr := a.recordDrainEvent(c.GetMachine(), findCondition(old.GetStatus().GetConditions(), MachineDrained),
		findCondition(m.GetStatus().GetConditions(), MachineDrained)); aerr != nil {
		return aerr
	}
	srv, aerr := a.getServer(m.GetSpec().GetServer())
	if aerr != nil {
		return aerr
	}
	if srv == nil {
		if proto.Equal(m, old) {
			return nil
		}
		a.touch(m.Metadata, false)
		return a.put(m, false)
	}
	// refreshMachine stores m when it differs from old.
	return a.refreshMachineFrom(old, m, srv, now)
}

// putBootstrapToken records a bootstrap token the leader created in a
// Cluster for one Machine (see roostv1.BootstrapToken).
func (a *applier) putBootstrapToken(c *roostv1.PutBootstrapToken) *apierror.Error {
	t := c.GetToken()
	var bad []apierror.Violation
	if !bootstrapTokenIDRE.MatchString(t.GetTokenId()) {
		bad = append(bad, apierror.Violation{Field: "token.tokenId", Message: "must match [a-z0-9]{6}"})
	}
	if !bootstrapTokenSecretRE.MatchString(t.GetSecret()) {
		bad = append(bad, apierror.Violation{Field: "token.secret", Message: "must match [a-z0-9]{16}"})
	}
	if t.GetMachine() == "" {
		bad = append(bad, apierror.Violation{Field: "token.machine", Message: "is required"})
	}
	if t.GetExpiresAt() == nil {
		bad = append(bad, apierror.Violation{Field: "token.expiresAt", Message: "is required"})
	}
	if len(bad) > 0 {
		return apierror.Invalid("invalid bootstrap token", bad...)
	}
	if err := a.txn.Insert(tableBootstrapTokens, proto.Clone(t)); err != nil {
		return internal(err)
	}
	return nil
}

// deleteBootstrapTokens forgets tokens by id; unknown ids are ignored.
func (a *applier) deleteBootstrapTokens(c *roostv1.DeleteBootstrapTokens) *apierror.Error {
	for _, id := range c.GetTokenIds() {
		raw, err := a.txn.First(tableBootstrapTokens, indexID, id)
		if err != nil {
			return internal(err)
		}
		if raw == nil {
			continue
		}
		if err := a.txn.Delete(tableBootstrapTokens, raw); err != nil {
			return internal(err)
		}
	}
	return nil
}

// BootstrapTokens returns copies of the stored bootstrap tokens (with
// their secrets), sorted by machine, then expiry. Internal: for the leader's
// cluster controller and the desired-state push only.
func (f *FSM) BootstrapTokens() []*roostv1.BootstrapToken {
	var out []*roostv1.BootstrapToken
	it, err := f.db.Load().Txn(false).Get(tableBootstrapTokens, indexID)
	if err != nil {
		return nil
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, proto.Clone(raw.(*roostv1.BootstrapToken)).(*roostv1.BootstrapToken))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GetMachine() != out[j].GetMachine() {
			return out[i].GetMachine() < out[j].GetMachine()
		}
		return out[i].GetExpiresAt().AsTime().Before(out[j].GetExpiresAt().AsTime())
	})
	return out
}
