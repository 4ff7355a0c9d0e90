package state

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const uuidC = "4c4c4544-0042-3510-8052-b4c04f4d4e33"

// grantLeaseCmd asks a Lease for server into revision, expiring at
// expires, with the pool's bound maxUnavailable.
func grantLeaseCmd(server string, revision int64, expires time.Time, maxUnavailable int32) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{
		Server: server, Revision: revision, ExpiresAt: timestamppb.New(expires), MaxUnavailable: maxUnavailable,
		Uid: fmt.Sprintf("00000000-0000-4000-8000-%012d", 900+revision),
	}}}
}

// at stamps c with time t.
func at(c *roostv1.Command, t time.Time) *roostv1.Command {
	c.Time = timestamppb.New(t)
	return c
}

func releaseLeasesCmd(servers []string, tokens ...uint64) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_ReleaseLeases{ReleaseLeases: &roostv1.ReleaseLeases{Servers: servers, FencingTokens: tokens}}}
}

// lease returns server's Lease, or nil.
func lease(t *testing.T, f *FSM, server string) *roostv1.Lease {
	t.Helper()
	o, err := f.Get("Lease", server)
	if apierror.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.GetLease()
}

// leasePool is Pool "edge" (no cluster) with three claimed Servers, each
// with Revision 1 rendered.
func leasePool(t *testing.T) *harness {
	h := newHarness(t, Options{})
	standalonePool(h)
	for i, s := range []string{uuidA, uuidB, uuidC} {
		claimedServer(h, s, fmt.Sprintf("52:54:00:00:00:0%d", i+1), fmt.Sprintf("edge-%d", i), "edge")
		h.mustApply(putRevisionCmd(s, fmt.Sprintf("edge-%d", i), 1))
	}
	return h
}

func TestGrantLease(t *testing.T) {
	h := leasePool(t)
	exp := t0.Add(time.Hour)

	res := h.mustApply(grantLeaseCmd(uuidA, 1, exp, 1))
	if got := actions(res); len(got) != 1 || got[0] != "Lease/"+uuidA+"=created" {
		t.Errorf("actions %v", got)
	}
	l := lease(t, h.f, uuidA)
	want := &roostv1.LeaseSpec{Server: uuidA, FencingToken: res.Index, ExpiresAt: timestamppb.New(exp), Revision: 1, Pool: "edge",
		Reason: "reboot into Revision 1 (pool edge)", Phase: LeaseGranted}
	if !proto.Equal(l.GetSpec(), want) {
		t.Errorf("lease spec %v, want %v", l.GetSpec(), want)
	}
	if l.GetMetadata().GetCreateIndex() != res.Index || l.GetKind() != "Lease" || l.GetMetadata().GetUid() == "" {
		t.Errorf("lease metadata %v", l.GetMetadata())
	}

	// The pool allows one: B is refused, naming the holder; the refusal
	// changes nothing.
	e := wantCode(t, h.apply(grantLeaseCmd(uuidB, 1, exp, 1)).Err, codes.ResourceExhausted)
	if !strings.Contains(e.Message, "pool edge allows 1 unavailable Machine(s) at once and 1 Lease(s) are held") || !strings.Contains(e.Message, uuidA) {
		t.Errorf("message %q", e.Message)
	}
	if lease(t, h.f, uuidB) != nil {
		t.Fatal("refused lease stored")
	}
	// max_unavailable 0 means 1.
	wantCode(t, h.apply(grantLeaseCmd(uuidB, 1, exp, 0)).Err, codes.ResourceExhausted)
	// With two allowed, B gets one; C then not.
	h.mustApply(grantLeaseCmd(uuidB, 1, exp, 2))
	wantCode(t, h.apply(grantLeaseCmd(uuidC, 1, exp, 2)).Err, codes.ResourceExhausted)

	// Renewal: A asks again (the pool is full) and gets its Lease renewed
	// with a new expiry; the Lease keeps its fencing token and identity.
	exp2 := exp.Add(time.Hour)
	res = h.mustApply(grantLeaseCmd(uuidA, 1, exp2, 1))
	if got := actions(res); len(got) != 1 || got[0] != "Lease/"+uuidA+"=configured" {
		t.Errorf("renewal actions %v", got)
	}
	l2 := lease(t, h.f, uuidA)
	if l2.GetSpec().GetFencingToken() != l.GetSpec().GetFencingToken() || !l2.GetSpec().GetExpiresAt().AsTime().Equal(exp2) ||
		l2.GetMetadata().GetUid() != l.GetMetadata().GetUid() || l2.GetMetadata().GetCreateIndex() != l.GetMetadata().GetCreateIndex() ||
		l2.GetMetadata().GetModifyIndex() != res.Index || l2.GetMetadata().GetGeneration() != l.GetMetadata().GetGeneration()+1 {
		t.Errorf("renewed lease %v (was %v)", l2, l)
	}
}

// A worker's Lease is first held Draining (it counts against the pool
// while the Node drains), then moves to Granted with the same fencing
// token; an unknown phase is refused.
func TestGrantLeaseDrainingThenGranted(t *testing.T) {
	h := leasePool(t)
	exp := t0.Add(time.Hour)
	cmd := grantLeaseCmd(uuidA, 1, exp, 1)
	cmd.GetGrantLease().Phase = LeaseDraining
	res := h.mustApply(cmd)
	l := lease(t, h.f, uuidA)
	if l.GetSpec().GetPhase() != LeaseDraining || l.GetSpec().GetFencingToken() != res.Index {
		t.Fatalf("draining lease %v", l.GetSpec())
	}
	wantCode(t, h.apply(grantLeaseCmd(uuidB, 1, exp, 1)).Err, codes.ResourceExhausted)
	h.mustApply(grantLeaseCmd(uuidA, 1, exp, 1))
	l2 := lease(t, h.f, uuidA)
	if l2.GetSpec().GetPhase() != LeaseGranted || l2.GetSpec().GetFencingToken() != l.GetSpec().GetFencingToken() {
		t.Fatalf("granted lease %v (was %v)", l2.GetSpec(), l.GetSpec())
	}
	bad := grantLeaseCmd(uuidA, 1, exp, 1)
	bad.GetGrantLease().Phase = "Sleeping"
	wantCode(t, h.apply(bad).Err, codes.InvalidArgument)
}

func TestGrantLeaseRefusals(t *testing.T) {
	h := leasePool(t)
	now := timeAt(h.idx + 1)
	e := wantCode(t, h.apply(grantLeaseCmd(uuidA, 1, now, 1)).Err, codes.InvalidArgument)
	if len(e.Violations) != 1 || e.Violations[0].Field != "expires_at" {
		t.Errorf("violations %v", e.Violations)
	}
	wantCode(t, h.apply(&roostv1.Command{Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{Server: uuidA, Revision: 1}}}).Err, codes.InvalidArgument)
	wantCode(t, h.apply(grantLeaseCmd("gone", 1, t0.Add(time.Hour), 1)).Err, codes.NotFound)
	// An unclaimed Server reboots into nothing.
	h.mustApply(deleteMachinesCmd("edge", nil, []string{uuidA}))
	e = wantCode(t, h.apply(grantLeaseCmd(uuidA, 1, t0.Add(time.Hour), 1)).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "not claimed") {
		t.Errorf("message %q", e.Message)
	}
}

func TestGrantLeaseStandaloneUnbounded(t *testing.T) {
	h := newHarness(t, Options{})
	claimedServer(h, uuidA, "52:54:00:00:00:01", "a", "")
	claimedServer(h, uuidB, "52:54:00:00:00:02", "b", "")
	h.mustApply(grantLeaseCmd(uuidA, 1, t0.Add(time.Hour), 1))
	h.mustApply(grantLeaseCmd(uuidB, 1, t0.Add(time.Hour), 1))
	if l := lease(t, h.f, uuidB); l.GetSpec().GetPool() != "" || l.GetSpec().GetReason() != "reboot into Revision 1" {
		t.Errorf("lease %v", l)
	}
}

func TestExpiredLeasesDoNotCount(t *testing.T) {
	h := leasePool(t)
	start := timeAt(h.idx + 1)
	h.mustApply(at(grantLeaseCmd(uuidA, 1, start.Add(time.Minute), 1), start))
	// Still held a second before expiry, not at expiry.
	wantCode(t, h.apply(at(grantLeaseCmd(uuidB, 1, start.Add(time.Hour), 1), start.Add(time.Minute-time.Second))).Err, codes.ResourceExhausted)
	h.mustApply(at(grantLeaseCmd(uuidB, 1, start.Add(time.Hour), 1), start.Add(time.Minute)))
	if lease(t, h.f, uuidA) == nil {
		t.Error("an expired Lease was deleted by granting another (only its owner's report settles it)")
	}
	// A, whose Lease expired, does not hold one any more: asking again
	// counts against the pool like a new Lease.
	e := wantCode(t, h.apply(at(grantLeaseCmd(uuidA, 1, start.Add(time.Hour), 1), start.Add(2*time.Minute))).Err, codes.ResourceExhausted)
	if !strings.Contains(e.Message, uuidB) {
		t.Errorf("message %q", e.Message)
	}
	if l := lease(t, h.f, uuidA); !l.GetSpec().GetExpiresAt().AsTime().Equal(start.Add(time.Minute)) {
		t.Errorf("refused renewal changed A's lease: %v", l)
	}
	// Once B's Lease is gone, A's request is granted (renewing its object).
	h.mustApply(releaseLeasesCmd([]string{uuidB}))
	res := h.mustApply(at(grantLeaseCmd(uuidA, 1, start.Add(time.Hour), 1), start.Add(3*time.Minute)))
	if got := actions(res); len(got) != 1 || got[0] != "Lease/"+uuidA+"=configured" {
		t.Errorf("actions %v", got)
	}
}

func TestReleaseLeases(t *testing.T) {
	h := leasePool(t)
	exp := t0.Add(time.Hour)
	ra := h.mustApply(grantLeaseCmd(uuidA, 1, exp, 3))
	rb := h.mustApply(grantLeaseCmd(uuidB, 1, exp, 3))
	// Wrong fencing token: kept. Unknown server: skipped.
	res := h.mustApply(releaseLeasesCmd([]string{uuidA, "gone"}, ra.Index+100))
	if len(res.Results) != 0 || lease(t, h.f, uuidA) == nil {
		t.Fatalf("results %v", res.Results)
	}
	// Matching token for A, 0 (any) for B.
	res = h.mustApply(releaseLeasesCmd([]string{uuidA, uuidB}, ra.Index, 0))
	if got := actions(res); len(got) != 2 || got[0] != "Lease/"+uuidA+"=deleted" || got[1] != "Lease/"+uuidB+"=deleted" {
		t.Errorf("actions %v", got)
	}
	if lease(t, h.f, uuidA) != nil || lease(t, h.f, uuidB) != nil {
		t.Error("leases left")
	}
	_ = rb
	// A token list shorter than the servers matches any for the rest.
	h.mustApply(grantLeaseCmd(uuidA, 1, exp, 3))
	h.mustApply(grantLeaseCmd(uuidC, 1, exp, 3))
	res = h.mustApply(releaseLeasesCmd([]string{uuidA, uuidC}, 1))
	if got := actions(res); len(got) != 1 || got[0] != "Lease/"+uuidC+"=deleted" {
		t.Errorf("actions %v", got)
	}
}

// TestLeaseSettlement: the FSM deletes a Lease once the Server booted its
// Revision healthy, or the Revision failed, or the Machine is released.
func TestLeaseSettlement(t *testing.T) {
	exp := t0.Add(time.Hour)
	t.Run("healthy boot", func(t *testing.T) {
		h := leasePool(t)
		h.mustApply(grantLeaseCmd(uuidA, 1, exp, 1))
		// Booted, not yet healthy: still held.
		h.mustApply(bootReport(uuidA, 1, ""))
		if lease(t, h.f, uuidA) == nil {
			t.Fatal("lease released before the boot was assessed")
		}
		h.mustApply(bootReport(uuidA, 1, "False"))
		if lease(t, h.f, uuidA) == nil {
			t.Fatal("lease released by an unhealthy boot")
		}
		sub, _ := h.f.Subscribe("Lease", h.f.LastIndex())
		defer sub.Close()
		h.mustApply(bootReport(uuidA, 1, "True"))
		if lease(t, h.f, uuidA) != nil {
			t.Fatal("lease kept after a healthy boot")
		}
		if ev := <-sub.Events(); ev.GetType() != roostv1.WatchEvent_TYPE_DELETED || ev.GetObject().GetLease().GetSpec().GetServer() != uuidA {
			t.Errorf("event %v", ev)
		}
		// The slot is free for the next Server.
		h.mustApply(grantLeaseCmd(uuidB, 1, exp, 1))
	})
	t.Run("healthy boot of another revision", func(t *testing.T) {
		h := leasePool(t)
		h.mustApply(putRevisionCmd(uuidA, "edge-0", 2))
		h.mustApply(grantLeaseCmd(uuidA, 2, exp, 1))
		// The Server still runs 1 healthy: its Lease into 2 is not over.
		h.mustApply(bootReport(uuidA, 1, "True"))
		if lease(t, h.f, uuidA) == nil {
			t.Fatal("lease into 2 released by a healthy boot of 1")
		}
	})
	t.Run("failed revision", func(t *testing.T) {
		h := leasePool(t)
		h.mustApply(bootReport(uuidA, 1, "True"))
		h.mustApply(putRevisionCmd(uuidA, "edge-0", 2))
		h.mustApply(grantLeaseCmd(uuidA, 2, exp, 1))
		h.mustApply(bootReport(uuidA, 1, "True", &roostv1.FailedRevision{Number: 2, Reason: "ran out of tries"}))
		if lease(t, h.f, uuidA) != nil {
			t.Fatal("lease kept after its revision failed")
		}
	})
	t.Run("machine released", func(t *testing.T) {
		h := leasePool(t)
		h.mustApply(grantLeaseCmd(uuidA, 1, exp, 1))
		h.mustApply(grantLeaseCmd(uuidB, 1, exp, 2))
		h.mustApply(deleteMachinesCmd("edge", nil, []string{uuidA}))
		if lease(t, h.f, uuidA) != nil {
			t.Fatal("lease kept after the machine was released")
		}
		h.mustApply(deleteCmd("Machine", "edge-1"))
		if lease(t, h.f, uuidB) != nil {
			t.Fatal("lease kept after the machine was deleted")
		}
	})
}

// TestRevisionsAndLeasesSnapshot: Revisions and Leases written by their
// commands survive a snapshot and restore, and the restored FSM goes on
// exactly like the original.
func TestRevisionsAndLeasesSnapshot(t *testing.T) {
	h := leasePool(t)
	h.mustApply(bootReport(uuidA, 1, "True"))
	h.mustApply(putRevisionCmd(uuidA, "edge-0", 2))
	h.mustApply(bootReport(uuidA, 1, "True", &roostv1.FailedRevision{Number: 2, Reason: "ran out of tries"}))
	h.mustApply(putRevisionCmd(uuidA, "edge-0", 3))
	h.mustApply(grantLeaseCmd(uuidA, 3, t0.Add(time.Hour), 2))
	h.mustApply(grantLeaseCmd(uuidB, 1, t0.Add(time.Hour), 2))
	h.mustApply(bootReport(uuidB, 1, ""))

	want := readTables(t, h.f)
	if len(want.objects["Revision"]) != 5 || len(want.objects["Lease"]) != 2 {
		t.Fatalf("test setup: %d revisions, %d leases", len(want.objects["Revision"]), len(want.objects["Lease"]))
	}
	data := snapshotBytes(t, h.f)
	restored := restoreNew(t, data)
	got := readTables(t, restored)
	for _, k := range []string{"Revision", "Lease", "Machine", "Server"} {
		if !equalMsgs(got.objects[k], want.objects[k]) {
			t.Errorf("%s table differs after restore:\n got %v\nwant %v", k, got.objects[k], want.objects[k])
		}
	}
	if !bytes.Equal(snapshotBytes(t, restored), data) {
		t.Error("snapshot bytes differ after restore")
	}
	// The refs index is rebuilt: Revisions are found by Server.
	if revisionPhases(restored, uuidA) != revisionPhases(h.f, uuidA) || revisionPhases(restored, uuidA) != "1=Good 2=Failed 3=Pending" {
		t.Errorf("restored phases %q", revisionPhases(restored, uuidA))
	}
	d1, g1 := h.f.DesiredRevision(uuidA)
	d2, g2 := restored.DesiredRevision(uuidA)
	if !proto.Equal(d1, d2) || g1 != g2 || d1.GetSpec().GetNumber() != 3 {
		t.Errorf("DesiredRevision %v %d / %v %d", d1, g1, d2, g2)
	}
	// Both go on alike: the numbering, the lease bound, the settlement.
	rh := &harness{tb: t, f: restored, idx: h.idx}
	for _, c := range []func() *roostv1.Command{
		func() *roostv1.Command { return putRevisionCmd(uuidA, "edge-0", 3) },
		func() *roostv1.Command { return putRevisionCmd(uuidA, "edge-0", 4) },
		func() *roostv1.Command { return grantLeaseCmd(uuidC, 1, t0.Add(time.Hour), 2) },
		func() *roostv1.Command { return bootReport(uuidB, 1, "True") },
		func() *roostv1.Command { return grantLeaseCmd(uuidC, 1, t0.Add(time.Hour), 2) },
	} {
		ra, rb := h.apply(c()), rh.apply(c())
		if !equalMsgs(ra.Results, rb.Results) || fmt.Sprint(ra.Err) != fmt.Sprint(rb.Err) {
			t.Fatalf("results differ: %v %v / %v %v", ra.Results, ra.Err, rb.Results, rb.Err)
		}
	}
	if lease(t, restored, uuidC) == nil || lease(t, restored, uuidB) != nil {
		t.Error("restored FSM: lease bound or settlement lost")
	}
	if !bytes.Equal(snapshotBytes(t, h.f), snapshotBytes(t, restored)) {
		t.Fatal("restored FSM diverged")
	}
}

// TestRevisionLeaseDeterminism replays random Revision, Lease, report,
// reachability and claim commands on two FSMs (one watched) and checks
// results and snapshots agree, and the history and lease invariants hold.
func TestRevisionLeaseDeterminism(t *testing.T) {
	servers := []string{uuidA, uuidB, uuidC}
	for seed := int64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			// The generator applies each command to an FSM of its own, so
			// that most PutRevisions carry the next number.
			gen := newHarness(t, Options{})
			var logs [][]byte
			add := func(c *roostv1.Command) {
				if c.Time == nil {
					c.Time = timestamppb.New(timeAt(uint64(len(logs) + 1)))
				}
				data := mustMarshal(t, c)
				logs = append(logs, data)
				gen.applyRaw(data)
			}
			add(putEnrollTokenCmd("abcdef", tokSecret))
			add(gen.objects(machineClassObj("standard"), poolObj("edge", "", func(s *roostv1.PoolSpec) { s.Replicas = nil })))
			for i, s := range servers {
				add(enrollCmd(tokSecret, s, []string{fmt.Sprintf("52:54:00:00:00:0%d", i+1)}, inventory(16, 64)))
				add(statusCmd(&roostv1.UpdateServerStatus{Name: s, Connected: true}))
			}
			r := rand.New(rand.NewSource(seed))
			latest := func(s string) int64 { return gen.f.LatestRevision(s).GetSpec().GetNumber() }
			for i := 0; i < 300; i++ {
				s := servers[r.Intn(len(servers))]
				si := 0
				for j, x := range servers {
					if x == s {
						si = j
					}
				}
				// two Machine names per Server, so that a new claim is a
				// new Machine
				name := fmt.Sprintf("m%d-%d", si, r.Intn(2))
				if m := gen.f.MachineOf(s); m != nil && r.Intn(5) > 0 {
					name = m.GetMetadata().GetName()
				}
				n := r.Int63n(latest(s) + 2)
				switch r.Intn(10) {
				case 0:
					add(createMachinesCmd(false, &roostv1.NewMachine{Name: name, Uid: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
						Server: s, Pool: []string{"", "edge"}[r.Intn(2)]}))
				case 1:
					if r.Intn(3) == 0 {
						add(deleteMachinesCmd("edge", nil, []string{s}))
					}
				case 2, 3:
					num := latest(s) + 1 // mostly the right number, sometimes a stale one
					if r.Intn(4) == 0 {
						num = r.Int63n(num + 1)
					}
					add(putRevisionCmd(s, name, num))
				case 4, 5:
					var failed []*roostv1.FailedRevision
					if r.Intn(3) == 0 {
						failed = append(failed, &roostv1.FailedRevision{Number: 1 + r.Int63n(latest(s)+1), Reason: "ran out of tries"})
					}
					add(bootReport(s, n, []string{"", "True", "False"}[r.Intn(3)], failed...))
				case 6, 7:
					now := timeAt(uint64(len(logs) + 1))
					add(grantLeaseCmd(s, n, now.Add(time.Duration(1+r.Intn(20))*time.Second), int32(r.Intn(3))))
				case 8:
					var tok uint64
					if l := lease(t, gen.f, s); l != nil && r.Intn(2) == 0 {
						tok = l.GetSpec().GetFencingToken() + uint64(r.Intn(2))
					}
					add(releaseLeasesCmd([]string{s}, tok))
				default:
					add(reachabilityCmd(s, r.Intn(3) > 0))
				}
			}
			a, b := newHarness(t, Options{}), newHarness(t, Options{WatchRing: 3, WatchBuffer: 1})
			sub, _ := b.f.Subscribe("", 0)
			defer sub.Close()
			counts := map[string]int{}
			for i, data := range logs {
				kept := bootedRevisions(t, a.f, servers)
				ra, rb := a.applyRaw(data), b.applyRaw(data)
				for s, name := range kept {
					if _, err := a.f.Get("Revision", name); err != nil {
						t.Fatalf("log %d: Server %s's booted Revision %s was removed", i+1, s, name)
					}
				}
				if !equalMsgs(ra.Results, rb.Results) || fmt.Sprint(ra.Err) != fmt.Sprint(rb.Err) {
					t.Fatalf("log %d: results differ: %v %v / %v %v", i+1, ra.Results, ra.Err, rb.Results, rb.Err)
				}
				for _, res := range ra.Results {
					counts[res.GetKind()+"/"+res.GetAction()]++
				}
				checkRevisionInvariants(t, a.f, servers, timeAt(uint64(i+1)))
			}
			if testing.Verbose() {
				t.Logf("results: %v", counts)
			}
			if counts["Revision/created"] < 10 || counts["Lease/created"] == 0 || counts["Lease/deleted"] == 0 {
				t.Errorf("weak random sequence: %v", counts)
			}
			sa := snapshotBytes(t, a.f)
			if !bytes.Equal(sa, snapshotBytes(t, b.f)) {
				t.Fatal("snapshots differ")
			}
			if !bytes.Equal(snapshotBytes(t, restoreNew(t, sa)), sa) {
				t.Fatal("snapshot bytes differ after restore")
			}
		})
	}
}

// bootedRevisions names each Server's stored booted Revision.
func bootedRevisions(t *testing.T, f *FSM, servers []string) map[string]string {
	out := map[string]string{}
	for _, s := range servers {
		o, err := f.Get("Server", s)
		if err != nil {
			continue
		}
		if n := o.GetServer().GetStatus().GetBootedRevision(); n > 0 {
			if _, err := f.Get("Revision", RevisionName(s, n)); err == nil {
				out[s] = RevisionName(s, n)
			}
		}
	}
	return out
}

// checkRevisionInvariants: at most MaxRevisionHistory Revisions per
// Server, numbered upwards, in a known phase; a Lease is held only by a
// claimed Server.
func checkRevisionInvariants(t *testing.T, f *FSM, servers []string, now time.Time) {
	t.Helper()
	for _, s := range servers {
		revs := f.Revisions(s)
		if len(revs) > MaxRevisionHistory {
			t.Fatalf("Server %s has %d Revisions", s, len(revs))
		}
		for i := 1; i < len(revs); i++ {
			if revs[i].GetSpec().GetNumber() <= revs[i-1].GetSpec().GetNumber() {
				t.Fatalf("Server %s: Revisions out of order: %s", s, revisionPhases(f, s))
			}
		}
		for _, r := range revs {
			if p := r.GetStatus().GetPhase(); p != RevisionPending && p != RevisionBooted && p != RevisionGood && p != RevisionFailed && p != RevisionSuperseded {
				t.Fatalf("Revision %s phase %q", r.GetMetadata().GetName(), p)
			}
		}
		if l := lease(t, f, s); l != nil && f.MachineOf(s) == nil {
			t.Fatalf("Server %s holds a Lease but no Machine holds it", s)
		}
	}
}
