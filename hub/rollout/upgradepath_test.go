package rollout

import (
	"strings"
	"testing"
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A Pool whose channel's newest release does not upgrade from what its
// Machines run targets the intermediate release, and says so.
func TestViewsTargetTheIntermediateRelease(t *testing.T) {
	s := newSim(t, 1, simConfig{pools: 1, perPool: 2, start: time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC), days: 1})
	// Every Machine runs 2027.02.0; 2027.03.0 (from anything) is on the
	// channel with Revisions rendered; 2027.04.0 upgrades only from it.
	next := release("2027.04.0")
	next.GetImageRelease().Spec.UpgradesFrom = []string{"2027.03.0"}
	s.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: []*roostv1.Object{next}, Uids: []string{"00000000-0000-4000-8000-300000000000"}}}})
	views, err := s.ctrl.Views("pool-00")
	if err != nil {
		t.Fatal(err)
	}
	v := views[0]
	if v.Target != "2027.03.0" || !strings.Contains(v.TargetNote, "through 2027.03.0: 2027.04.0 upgrades only from 2027.03.0, not from 2027.02.0") {
		t.Fatalf("target %q (%q), want 2027.03.0 through the intermediate release", v.Target, v.TargetNote)
	}
	st := Plan(v, s.now)
	if st.GetTargetVersion() != "2027.03.0" {
		t.Errorf("planned target %s", st.GetTargetVersion())
	}

	// Once every Machine runs 2027.03.0, the Pool targets 2027.04.0.
	for _, sp := range s.pools {
		for _, srv := range sp.servers {
			s.report(srv, 2, "True", nil)
		}
	}
	views, _ = s.ctrl.Views("pool-00")
	if v := views[0]; v.Target != "2027.04.0" || v.TargetNote != "" {
		t.Fatalf("after the intermediate release: target %q (%q), want 2027.04.0", v.Target, v.TargetNote)
	}
}
