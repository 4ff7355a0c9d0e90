package cli

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// RolloutControl pauses and resumes as the hub's state does: a pause sets
// spec.rollout.paused and leaves a halt in place; a resume clears both.
func (f *fakeHub) RolloutControl(_ context.Context, req *roostv1.RolloutControlRequest) (*roostv1.RolloutControlResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[key("Pool", req.GetPool())]
	if !ok {
		return nil, apierror.NotFound("Pool", req.GetPool())
	}
	p := proto.Clone(o.GetPool()).(*roostv1.Pool)
	if p.Spec.Rollout == nil {
		p.Spec.Rollout = &roostv1.RolloutPolicy{}
	}
	switch req.GetAction() {
	case roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE:
		p.Spec.Rollout.Paused = true
	case roostv1.RolloutAction_ROLLOUT_ACTION_RESUME:
		p.Spec.Rollout.Paused = false
		p.Status.Rollout.Phase, p.Status.Rollout.Reason = "Progressing", "resumed by an operator"
	}
	f.objects[key("Pool", req.GetPool())] = resource.Wrap(p)
	return &roostv1.RolloutControlResponse{Pool: p}, nil
}

func rolloutPool(name, phase, reason string) *roostv1.Object {
	return resource.Wrap(&roostv1.Pool{ApiVersion: resource.APIVersion, Kind: "Pool", Metadata: &roostv1.ObjectMeta{Name: name},
		Spec:   &roostv1.PoolSpec{Cluster: "prod"},
		Status: &roostv1.PoolStatus{Rollout: &roostv1.RolloutStatus{Phase: phase, Reason: reason}}})
}

// TestRolloutPauseHalted: pausing a halted pool says that it stays halted
// until resume, not that it is paused.
func TestRolloutPauseHalted(t *testing.T) {
	f := newFakeHub()
	const reason = "2 Machine(s) failed, more than the failure budget 1"
	f.put(rolloutPool("workers", "Halted", reason))
	f.put(rolloutPool("edge", "Progressing", ""))
	config, _ := startFakeHub(t, f)

	r := runCLI(t, "", "--config", config, "rollout", "pause", "pool/workers")
	want := "pool/workers pause recorded; its rollout is halted and stays halted: no reboot starts until 'roostctl rollout resume workers', which lifts the halt and the pause\n" +
		"  halted: " + reason + "\n"
	if r.code != ExitOK || r.out != want || r.err != "" {
		t.Errorf("pause halted: exit %d\nstdout %q\nwant   %q\nstderr %q", r.code, r.out, want, r.err)
	}
	if strings.Contains(r.out, "workers paused") {
		t.Errorf("pause of a halted pool claims it is paused: %q", r.out)
	}
	r = runCLI(t, "", "--config", config, "rollout", "pause", "edge")
	if r.code != ExitOK || r.out != "pool/edge paused\n" {
		t.Errorf("pause progressing: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	r = runCLI(t, "", "--config", config, "rollout", "resume", "workers")
	if r.code != ExitOK || r.out != "pool/workers resumed\n" {
		t.Errorf("resume: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

// TestRolloutStatusPending: a pool without status.rollout (the rollout
// controller has not evaluated it yet) shows Pending with that reason,
// not an undocumented "Unknown" phase and "-"; evaluated pools show
// their status.
func TestRolloutStatusPending(t *testing.T) {
	f := newFakeHub()
	f.put(resource.Wrap(&roostv1.Pool{ApiVersion: resource.APIVersion, Kind: "Pool", Metadata: &roostv1.ObjectMeta{Name: "fresh"},
		Spec: &roostv1.PoolSpec{Cluster: "prod"}}))
	f.put(resource.Wrap(&roostv1.Pool{ApiVersion: resource.APIVersion, Kind: "Pool", Metadata: &roostv1.ObjectMeta{Name: "pinned"},
		Spec: &roostv1.PoolSpec{Cluster: "prod", ImageVersion: "2027.03.0"}, Status: &roostv1.PoolStatus{Machines: 3}}))
	f.put(rolloutPool("workers", "Progressing", "2 awaiting first install; 4 of 6 to reboot; 0 unavailable of 2 allowed"))
	config, _ := startFakeHub(t, f)

	r := runCLI(t, "", "--config", config, "rollout", "status")
	if r.code != ExitOK || r.err != "" {
		t.Fatalf("rollout status: exit %d, stderr %q", r.code, r.err)
	}
	lines := strings.Split(strings.TrimRight(r.out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 pools, got:\n%s", r.out)
	}
	want := map[string][]string{
		"fresh":   {"fresh", "Pending", "-", "-", "-", "-", "-", "the rollout controller has not evaluated this pool yet"},
		"pinned":  {"pinned", "Pending", "2027.03.0 (pinned)", "-", "-", "-", "-", "the rollout controller has not evaluated this pool yet"},
		"workers": {"workers", "Progressing", "<none>", "0/0", "0", "0", "<none>", "2 awaiting first install; 4 of 6 to reboot; 0 unavailable of 2 allowed"},
	}
	for _, l := range lines[1:] {
		name := strings.Fields(l)[0]
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected line %q", l)
			continue
		}
		// Columns are separated by at least 3 spaces.
		var cols []string
		for _, c := range strings.Split(l, "   ") {
			if c = strings.TrimSpace(c); c != "" {
				cols = append(cols, c)
			}
		}
		if strings.Join(cols, "|") != strings.Join(w, "|") {
			t.Errorf("pool %s:\ngot  %q\nwant %q", name, cols, w)
		}
	}
	if strings.Contains(r.out, "Unknown") {
		t.Errorf("output shows Unknown:\n%s", r.out)
	}
	r = runCLI(t, "", "--config", config, "rollout", "status", "pool/fresh")
	if r.code != ExitOK || !strings.Contains(r.out, "fresh   Pending") {
		t.Errorf("rollout status fresh: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}
