package clusters

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/kube"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Defaults for Cluster fields left unset.
const (
	DefaultBootstrapTokenTTL = time.Hour
	DefaultDrainTimeout      = 5 * time.Minute
	// DefaultTick is the period of the resync of every Cluster (its API's
	// reachability, Nodes and tokens change without the hub's state).
	DefaultTick = 5 * time.Second
	// DefaultMaxProposals is how many of the controller's commands may
	// be in Raft at once.
	DefaultMaxProposals = 4
	// workers is how many Clusters reconcile at once.
	workers = 4
	// requestTimeout bounds each API request of the controller's clients.
	requestTimeout = 10 * time.Second
	// reconcileTimeout bounds one pass over one Cluster.
	reconcileTimeout = 60 * time.Second
)

// Controller reconciles Clusters with the hub's state; see the package
// doc. Set the exported fields, then call Run: a hub/controller loop keyed
// by Cluster name.
type Controller struct {
	IsLeader func() bool
	// FSM is the replicated state read at each step.
	FSM *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, runs once per leadership term before the first read.
	Barrier func(context.Context) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tick is the period of the resync of every Cluster; default
	// DefaultTick.
	Tick time.Duration
	// MaxProposals bounds the controller's commands waiting on Raft at
	// once (Propose calls), whatever the number of Clusters reconciling
	// in parallel: a resync that finds thousands of new Clusters queues
	// their status writes here, a few at a time, instead of ahead of
	// every client's write in Raft's queue. Default DefaultMaxProposals.
	MaxProposals int
	// Metrics, if set, receives the loop's queue metrics.
	Metrics *controller.Metrics
	// Recorder, if set, records the orphans removed from a Cluster's API
	// (Nodes of destroyed Machines, bootstrap tokens the hub does not
	// hold or no longer needs for a gone Machine) as Events of the Cluster.
	Recorder *controller.EventRecorder
	Log      *slog.Logger

	// proposals holds one token per Propose call in flight (MaxProposals).
	proposals     *semaphore.Weighted
	proposalsOnce sync.Once

	mu      sync.Mutex
	clients map[string]*clusterClient // by Cluster name
	drains  map[string]*drainJob      // by Server name: drains for reboot Leases
	// releases are drains before Machines are released, by Machine name.
	releases map[string]*drainJob
	busy     map[string]bool      // Clusters whose reconcile runs
	orphans  map[string]time.Time // unknown token Secrets: first seen
}

// clusterClient is a client for one kubeconfig, with what was ensured
// through it.
type clusterClient struct {
	kubeconfigSum [32]byte
	client        *kube.Client
	rbacEnsured   bool
}

// Run reconciles each Cluster when it, one of its workers or their
// Leases change, and every Cluster each Tick, while this member leads,
// until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	tick := c.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	clusterOf := func(m *roostv1.Machine) []string {
		if cl := m.GetStatus().GetCluster(); cl != "" {
			return []string{cl}
		}
		return nil
	}
	(&controller.Controller{
		Name: "cluster", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Workers: workers, Resync: tick, Metrics: c.Metrics, Log: c.log(), OnStop: c.forget,
		ResyncKeys: func() []string { return controller.Names(c.FSM.Reader().List("Cluster")) },
		Sources: []controller.Source{
			{Kind: "Cluster", Keys: controller.ByName},
			{Kind: "Machine", Keys: func(ev *roostv1.WatchEvent) []string { return clusterOf(ev.GetObject().GetMachine()) }},
			{Kind: "Lease", Keys: func(ev *roostv1.WatchEvent) []string {
				return clusterOf(c.FSM.Reader().MachineOf(resource.NameOf(ev.GetObject())))
			}},
		},
	}).Run(ctx)
}

// propose is Propose, waiting first (bounded by ctx) while MaxProposals
// of the controller's commands are in Raft.
func (c *Controller) propose(ctx context.Context, cmd *roostv1.Command) error {
	c.proposalsOnce.Do(func() {
		n := c.MaxProposals
		if n <= 0 {
			n = DefaultMaxProposals
		}
		c.proposals = semaphore.NewWeighted(int64(n))
	})
	if err := c.proposals.Acquire(ctx, 1); err != nil {
		return err
	}
	defer c.proposals.Release(1)
	return c.Propose(ctx, cmd)
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

func (c *Controller) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// Step reconciles every Cluster once, all at once, when this member
// leads (what a resync queues); the first error is returned after every
// Cluster was tried.
func (c *Controller) Step(ctx context.Context) error {
	if !c.IsLeader() {
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, name := range controller.Names(c.FSM.Reader().List("Cluster")) {
		wg.Go(func() {
			if _, err := c.Reconcile(ctx, name); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// Reconcile runs one pass over Cluster name (see the package doc),
// bounded by reconcileTimeout: a pass that hangs (an API that accepts and
// never answers) runs on aside, and the Cluster is skipped until it ends.
func (c *Controller) Reconcile(ctx context.Context, name string) (controller.Result, error) {
	c.forgetReleases()
	o, err := c.FSM.Get("Cluster", name)
	if err != nil {
		return controller.Result{}, nil // deleted
	}
	if !c.begin(name) {
		return controller.Result{}, nil
	}
	cl := o.GetCluster()
	res := make(chan error, 1)
	go func() {
		defer c.end(name)
		rctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
		defer cancel()
		res <- c.reconcile(rctx, cl)
	}()
	select {
	case err := <-res:
		if err != nil {
			return controller.Result{}, fmt.Errorf("cluster %s: %w", name, err)
		}
		return controller.Result{}, nil
	case <-time.After(reconcileTimeout + time.Second):
		c.log().Warn("cluster controller: a cluster's reconcile outlived its bound; it runs on, the others go on", "cluster", name)
		return controller.Result{}, nil
	}
}

// begin marks Cluster name busy; false when its last pass still runs.
func (c *Controller) begin(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy == nil {
		c.busy = map[string]bool{}
	}
	if c.busy[name] {
		return false
	}
	c.busy[name] = true
	return true
}

func (c *Controller) end(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.busy, name)
}

// forget drops clients and drain jobs when this member stops leading.
func (c *Controller) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clients = nil
	for _, j := range c.drains {
		j.cancel()
	}
	c.drains = nil
	for _, j := range c.releases {
		j.cancel()
	}
	c.releases = nil
}

// client returns the cached client of cl, rebuilt when its kubeconfig
// changed; nil and an error when it has none or it does not load.
func (c *Controller) client(cl *roostv1.Cluster) (*clusterClient, error) {
	kc := cl.GetSpec().GetKubeconfig()
	if kc == "" {
		return nil, errNoCredentials
	}
	sum := sha256.Sum256([]byte(kc))
	name := cl.GetMetadata().GetName()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.clients[name]; cc != nil && cc.kubeconfigSum == sum {
		return cc, nil
	}
	k, err := kube.NewClient([]byte(kc), requestTimeout)
	if err != nil {
		return nil, err
	}
	if c.clients == nil {
		c.clients = map[string]*clusterClient{}
	}
	cc := &clusterClient{kubeconfigSum: sum, client: k}
	c.clients[name] = cc
	return cc, nil
}

var errNoCredentials = errors.New("no credentials: set them with `roostctl cluster set-credentials`")

// reconcile runs one pass over one Cluster (see the package doc).
func (c *Controller) reconcile(ctx context.Context, cl *roostv1.Cluster) error {
	name := cl.GetMetadata().GetName()
	status := &roostv1.ClusterStatus{}
	cc, err := c.client(cl)
	if err != nil {
		reason := "InvalidCredentials"
		if errors.Is(err, errNoCredentials) {
			reason = "NoCredentials"
		}
		return c.putClusterStatus(ctx, cl, unreachable(status, reason, err, c.now()))
	}
	version, err := cc.client.Probe(ctx)
	if err != nil {
		return c.putClusterStatus(ctx, cl, unreachable(status, "Unreachable", err, c.now()))
	}
	status.ServerVersion = version
	if !cc.rbacEnsured {
		if err := cc.client.EnsureBootstrapRBAC(ctx); err != nil {
			return c.putClusterStatus(ctx, cl, unreachable(status, "Forbidden", fmt.Errorf("ensuring bootstrap RBAC: %w", err), c.now()))
		}
		cc.rbacEnsured = true
	}
	nodes, err := cc.client.ListNodes(ctx)
	if err != nil {
		return c.putClusterStatus(ctx, cl, unreachable(status, "Unreachable", fmt.Errorf("listing Nodes: %w", err), c.now()))
	}
	status.Conditions = []*roostv1.Condition{{Type: state.ClusterReachable, Status: "True", Reason: "Reachable",
		Message: fmt.Sprintf("API server %s, version %s", cc.client.Host(), version)}}
	byServer := map[string]kube.Node{}
	for _, n := range nodes {
		status.Nodes++
		if n.Ready {
			status.ReadyNodes++
		}
		byServer[n.Server] = n
	}
	if err := c.putClusterStatus(ctx, cl, status); err != nil {
		return err
	}

	machines := c.workers(name)
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, m := range machines {
		keep(c.observeMachine(ctx, m, byServer))
	}
	keep(c.collectNodes(ctx, name, cc.client, nodes))
	keep(c.uncordon(ctx, cc.client, machines, byServer))
	keep(c.reconcileTokens(ctx, cl, cc.client, machines))
	return first
}

// unreachable fills st for a Cluster the hub cannot use.
func unreachable(st *roostv1.ClusterStatus, reason string, err error, now time.Time) *roostv1.ClusterStatus {
	st.Conditions = []*roostv1.Condition{{Type: state.ClusterReachable, Status: "False", Reason: reason, Message: err.Error(),
		LastTransitionTime: timestamppb.New(now)}}
	return st
}

// putClusterStatus proposes st when it differs from cl's (ignoring
// transition times, which are kept while a condition's status holds).
func (c *Controller) putClusterStatus(ctx context.Context, cl *roostv1.Cluster, st *roostv1.ClusterStatus) error {
	old := cl.GetStatus()
	for _, cond := range st.GetConditions() {
		if prev := state.FindCondition(old.GetConditions(), cond.GetType()); prev != nil && prev.GetStatus() == cond.GetStatus() {
			cond.LastTransitionTime = prev.GetLastTransitionTime()
		} else if cond.LastTransitionTime == nil {
			cond.LastTransitionTime = timestamppb.New(c.now())
		}
	}
	st.CredentialsSet = old.GetCredentialsSet()
	if proto.Equal(old, st) {
		return nil
	}
	if prev, cur := state.FindCondition(old.GetConditions(), state.ClusterReachable), st.GetConditions()[0]; prev.GetStatus() != cur.GetStatus() || prev.GetReason() != cur.GetReason() {
		c.log().Info("cluster reachability changed", "cluster", cl.GetMetadata().GetName(), "reachable", cur.GetStatus(), "reason", cur.GetReason(), "message", cur.GetMessage())
	}
	return c.propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateClusterStatus{UpdateClusterStatus: &roostv1.UpdateClusterStatus{
		Cluster: cl.GetMetadata().GetName(), Status: st}}})
}

// workers are the Machines joining Cluster name, sorted by name.
func (c *Controller) workers(name string) []*roostv1.Machine {
	objs, _, err := c.FSM.List("Machine", "")
	if err != nil {
		return nil
	}
	var out []*roostv1.Machine
	for _, o := range objs {
		if m := o.GetMachine(); m.GetStatus().GetCluster() == name && m.GetSpec().GetServer() != "" {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetMetadata().GetName() < out[j].GetMetadata().GetName() })
	return out
}

// observeMachine records m's Node (name and Ready) when it changed.
func (c *Controller) observeMachine(ctx context.Context, m *roostv1.Machine, byServer map[string]kube.Node) error {
	n, ok := byServer[m.GetSpec().GetServer()]
	var conds []*roostv1.Condition
	if ok {
		cond := &roostv1.Condition{Type: state.MachineNodeReady, Status: "False", Reason: "NodeNotReady", Message: n.ReadyMessage}
		if n.Ready {
			cond.Status, cond.Reason = "True", "NodeReady"
		}
		conds = append(conds, cond)
	}
	st := m.GetStatus()
	prev := state.FindCondition(st.GetConditions(), state.MachineNodeReady)
	same := st.GetNodeName() == n.Name
	if ok {
		same = same && prev != nil && prev.GetStatus() == conds[0].GetStatus() && prev.GetReason() == conds[0].GetReason() && prev.GetMessage() == conds[0].GetMessage()
	}
	if same {
		return nil
	}
	return c.propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateMachineClusterStatus{UpdateMachineClusterStatus: &roostv1.UpdateMachineClusterStatus{
		Machine: m.GetMetadata().GetName(), NodeName: n.Name, Conditions: conds}}})
}

// setDrained records m's Drained condition when it changed.
func (c *Controller) setDrained(ctx context.Context, m *roostv1.Machine, status, reason, msg string) error {
	if prev := state.FindCondition(m.GetStatus().GetConditions(), state.MachineDrained); prev != nil &&
		prev.GetStatus() == status && prev.GetReason() == reason && prev.GetMessage() == msg {
		return nil
	}
	return c.propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateMachineClusterStatus{UpdateMachineClusterStatus: &roostv1.UpdateMachineClusterStatus{
		Machine: m.GetMetadata().GetName(), NodeName: m.GetStatus().GetNodeName(),
		Conditions: []*roostv1.Condition{{Type: state.MachineDrained, Status: status, Reason: reason, Message: msg}}}}})
}

// collectNodes deletes the Nodes of Servers the hub knows that no worker
// Machine holds any more (their Machine was Destroyed). A Node of a
// Server the hub does not know, or of a Server another Cluster object's
// worker holds (two Cluster objects may name one API), is left alone.
func (c *Controller) collectNodes(ctx context.Context, cluster string, k *kube.Client, nodes []kube.Node) error {
	r := c.FSM.Reader()
	var first error
	for _, n := range nodes {
		if r.Get("Server", n.Server) == nil {
			continue
		}
		if m := c.FSM.MachineOf(n.Server); m != nil && m.GetStatus().GetCluster() != "" {
			continue
		}
		c.log().Info("deleting the Node of a destroyed Machine", "node", n.Name, "server", n.Server)
		if err := k.DeleteNode(ctx, n.Name); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		c.Metrics.OrphansRemoved(controller.OrphanNode, 1)
		c.Recorder.Record("Cluster", cluster, state.EventNormal, "OrphanNodeDeleted",
			fmt.Sprintf("deleted Node %s of Server %s: no Machine holds the Server any more", n.Name, n.Server))
	}
	return first
}

// uncordon makes schedulable again the Nodes Roost cordoned whose reboot
// Lease is settled (the Server booted healthy, its Revision failed, or the
// Lease was released) and that are not held for their Machine's release
// (see PrepareRelease).
func (c *Controller) uncordon(ctx context.Context, k *kube.Client, machines []*roostv1.Machine, byServer map[string]kube.Node) error {
	var first error
	for _, m := range machines {
		n, ok := byServer[m.GetSpec().GetServer()]
		if !ok || !n.CordonedByRoost || c.leaseHeld(m.GetSpec().GetServer()) || c.releasing(m.GetMetadata().GetName()) {
			continue
		}
		if err := k.Uncordon(ctx, n.Name); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		c.log().Info("uncordoned Node after its reboot", "node", n.Name, "machine", m.GetMetadata().GetName())
		if err := c.setDrained(ctx, m, "False", "Uncordoned", fmt.Sprintf("the reboot is over; Node %s is schedulable again", n.Name)); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// leaseHeld says whether server holds an unexpired Lease.
func (c *Controller) leaseHeld(server string) bool {
	o, err := c.FSM.Get("Lease", server)
	if err != nil {
		return false
	}
	return o.GetLease().GetSpec().GetExpiresAt().AsTime().After(c.now())
}
