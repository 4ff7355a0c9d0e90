package state

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// An apply warns about objects that are valid but cannot do their job yet
// (a Pool pinned to a version no release has, a Pool on a channel no
// release is on, a window whose rule has ended, a Pool whose every window
// has ended); the warnings go away once the missing part exists, and they
// change nothing: the objects are applied either way.
func TestApplyWarnsAboutObjectsThatCannotWorkYet(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(machineClassObj("standard")))
	check := func(what string, res *ApplyResult, want ...string) {
		t.Helper()
		if !slices.Equal(res.Warnings, want) {
			t.Errorf("%s: warnings\n%q\nwant\n%q", what, res.Warnings, want)
		}
	}
	pinned := poolObj("pinned", "", func(s *roostv1.PoolSpec) { s.Replicas, s.ImageChannel, s.ImageVersion = nil, "", "2026.11.0" })
	onChannel := poolObj("edge", "", func(s *roostv1.PoolSpec) { s.Replicas = nil })
	pinNote := "pool/pinned: no ImageRelease has version 2026.11.0 yet: its Machines install nothing until it is pushed ('roostctl image push')"
	channelNote := "pool/edge: no ImageRelease is on channel stable yet: its Machines install nothing until one is promoted ('roostctl image promote VERSION --channel stable')"

	dry := h.objects(pinned, onChannel)
	dry.GetApplyObjects().DryRun = true
	check("dry run", h.mustApply(dry), pinNote, channelNote)
	check("apply", h.mustApply(h.objects(pinned, onChannel)), pinNote, channelNote)
	if getPool(t, h.f, "pinned") == nil || getPool(t, h.f, "edge") == nil {
		t.Fatal("a warned-about Pool was not applied")
	}

	release := func(channels ...string) *roostv1.Object {
		return resource.Wrap(&roostv1.ImageRelease{Metadata: meta("v2026-11-0", nil), Spec: &roostv1.ImageReleaseSpec{Version: "2026.11.0", Channels: channels}})
	}
	h.mustApply(h.objects(release()))
	check("released, on no channel", h.mustApply(h.objects(pinned, onChannel)), channelNote)
	h.mustApply(h.objects(release("stable")))
	check("promoted", h.mustApply(h.objects(pinned, onChannel)))

	// timeAt(…) is November 2026: a rule that ended in 2020 never opens again.
	ended := resource.Wrap(&roostv1.MaintenanceWindow{Metadata: meta("ended", nil), Spec: &roostv1.MaintenanceWindowSpec{
		Rrule: "FREQ=DAILY;BYHOUR=2;UNTIL=20200101T000000Z", Duration: durationpb.New(time.Hour), TimeZone: "UTC"}})
	res := h.mustApply(h.objects(ended))
	if len(res.Warnings) != 1 || !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return w == "maintenancewindow/ended: has no opening after "+timeAt(h.idx).UTC().Format(time.RFC3339)+
			": spec.rrule ends (its UNTIL or COUNT has passed); Pools listing only this window will not upgrade after that (extend spec.rrule, or list another window in the Pools)"
	}) {
		t.Errorf("ended window: warnings %q", res.Warnings)
	}
	// Open now (timeAt is about 02:00 UTC on November 3rd), for the last time.
	last := resource.Wrap(&roostv1.MaintenanceWindow{Metadata: meta("last", nil), Spec: &roostv1.MaintenanceWindowSpec{
		Rrule: "FREQ=DAILY;BYHOUR=2;UNTIL=20261103T030000Z", Duration: durationpb.New(time.Hour), TimeZone: "UTC"}})
	check("window open for the last time", h.mustApply(h.objects(last)),
		"maintenancewindow/last: its current opening, until 2026-11-03T03:00:00Z, is its last: spec.rrule ends (UNTIL or COUNT); "+
			"Pools listing only this window will not upgrade after that (extend spec.rrule, or list another window in the Pools)")
	onlyEnded := poolObj("edge", "", func(s *roostv1.PoolSpec) { s.Replicas, s.MaintenanceWindows = nil, []string{"ended"} })
	check("pool with only an ended window", h.mustApply(h.objects(onlyEnded)),
		"pool/edge: none of its maintenance windows (ended) opens again: its rollouts will wait forever (list a window that opens again in spec.maintenanceWindows)")
	h.mustApply(h.objects(windowObj("tuesday")))
	both := poolObj("edge", "", func(s *roostv1.PoolSpec) { s.Replicas, s.MaintenanceWindows = nil, []string{"ended", "tuesday"} })
	check("pool with a window that opens again", h.mustApply(h.objects(both)))
}
