package revisions

import (
	"strings"
	"testing"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// upgrading is testRelease with upgradesFrom.
func upgrading(version string, from []string, channels ...string) *roostv1.ImageRelease {
	r := testRelease(version, nil, channels...)
	r.Spec.UpgradesFrom = from
	return r
}

// boot reports that server booted Revision n, healthy.
func (fl *fleet) boot(server string, n int64) {
	fl.t.Helper()
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: server, HasBootedRevision: true, BootedRevision: n, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: "True", Reason: "Test"}}}}})
}

func (fl *fleet) latestVersion(server string) string {
	revs := fl.revisions(server)
	if len(revs) == 0 {
		return ""
	}
	return revs[len(revs)-1].GetSpec().GetImageVersion()
}

// A jump the newest release of the channel does not upgrade from is
// routed through the intermediate release (even one no longer on the
// channel), one Revision at a time; a jump with no path is refused and
// the Server stays where it is.
func TestControllerRoutesUnsupportedJumpThroughIntermediate(t *testing.T) {
	fl := edgeFleet(t)
	fl.objects(testRelease("2026.10.0", nil, "stable"))
	fl.step()
	if got := fl.latestVersion(testServer); got != "2026.10.0" {
		t.Fatalf("first Revision renders %q, want 2026.10.0", got)
	}
	fl.boot(testServer, 1)
	if v := fl.f.MachineOf(testServer); v == nil {
		t.Fatal("no machine")
	}

	// 2026.11.0 (from 2026.10.0, not on the channel any more) and
	// 2026.12.0 (only from 2026.11.0, the channel's newest).
	fl.objects(upgrading("2026.11.0", []string{"2026.10.0"}), upgrading("2026.12.0", []string{"2026.11.0"}, "stable"))
	fl.step()
	if got := fl.latestVersion(testServer); got != "2026.11.0" {
		t.Fatalf("from 2026.10.0 the Server moves to %q, want the intermediate 2026.11.0", got)
	}
	fl.step()
	if n := len(fl.revisions(testServer)); n != 2 {
		t.Fatalf("%d Revisions before the Server booted the intermediate one, want 2", n)
	}
	fl.boot(testServer, 2)
	fl.step()
	if got := fl.latestVersion(testServer); got != "2026.12.0" {
		t.Fatalf("from 2026.11.0 the Server moves to %q, want 2026.12.0", got)
	}
	fl.boot(testServer, 3)

	// No release leads from 2026.12.0 to 2027.01.0: nothing is rendered.
	fl.objects(upgrading("2027.01.0", []string{"2026.12.5"}, "stable"))
	fl.step()
	if got := fl.latestVersion(testServer); got != "2026.12.0" {
		t.Fatalf("an unsupported jump rendered %q", got)
	}
	if !strings.Contains(fl.log.String(), "no supported upgrade path from 2026.12.0 to 2027.01.0") {
		t.Errorf("the refusal is not logged:\n%s", fl.log)
	}
}

func TestUpgradePathsNext(t *testing.T) {
	rels := []*roostv1.ImageRelease{
		upgrading("1.0.0", []string{"0.5.0"}), upgrading("2.0.0", []string{"1.0.0"}), upgrading("3.0.0", []string{"2.0.0"}),
		upgrading("3.1.0", nil), upgrading("4.0.0", []string{"3.0.0", "3.1.0"}),
	}
	var objs []*roostv1.Object
	for i, r := range rels {
		r.Metadata.CreateIndex = uint64(i + 1)
		objs = append(objs, resource.Wrap(r))
	}
	to4 := NewUpgradePaths(objs, rels[4])
	for _, tc := range []struct {
		from []string
		want string
		note string
	}{
		{nil, "4.0.0", ""},
		{[]string{"3.0.0"}, "4.0.0", ""},
		{[]string{"3.1.0", "3.0.0", ""}, "4.0.0", ""},
		// 3.1.0 upgrades from anything and leads to 4.0.0 in one move.
		{[]string{"1.0.0"}, "3.1.0", "through 3.1.0: 4.0.0 upgrades only from 3.0.0, 3.1.0, not from 1.0.0"},
		{[]string{"2.0.0", "1.0.0"}, "3.1.0", "through 3.1.0"},
	} {
		got, note := to4.Next(tc.from)
		if got.GetSpec().GetVersion() != tc.want || !strings.HasPrefix(note, tc.note) {
			t.Errorf("Next(%q) = %s %q, want %s %q", tc.from, got.GetSpec().GetVersion(), note, tc.want, tc.note)
		}
	}
	// Without 3.1.0, 1.0.0 goes through 2.0.0 then 3.0.0.
	objs = append(objs[:3:3], objs[4])
	to4 = NewUpgradePaths(objs, rels[4])
	if got, _ := to4.Next([]string{"1.0.0"}); got.GetSpec().GetVersion() != "2.0.0" {
		t.Errorf("from 1.0.0 next is %s, want 2.0.0", got.GetSpec().GetVersion())
	}
	if got, _ := to4.Next([]string{"1.0.0", "2.0.0"}); got.GetSpec().GetVersion() != "2.0.0" {
		t.Errorf("from 1.0.0 and 2.0.0 next is %s, want 2.0.0 (the Machines furthest behind)", got.GetSpec().GetVersion())
	}
	if got, note := to4.Next([]string{"0.9.0"}); got != nil || !strings.Contains(note, "no supported upgrade path from 0.9.0 to 4.0.0") {
		t.Errorf("from 0.9.0: %v %q, want a refusal", got, note)
	}
}
