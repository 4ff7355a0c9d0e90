package boot

import (
	"context"
	"reflect"
	"testing"
)

// TestFakeBoot: a new entry is tried three times, then the blessed
// previous one boots and the new one is exhausted (what Failed reports);
// no entry boots the enrollment image (0).
func TestFakeBoot(t *testing.T) {
	e := newESP(t)
	if n, err := e.FakeBoot(); n != 0 || err != nil {
		t.Fatalf("FakeBoot on an empty ESP = %d, %v", n, err)
	}
	touch(t, e, "roost-rev-1.conf", EntryName(2, DefaultTries))
	var booted []int64
	for range 5 {
		n, err := e.FakeBoot()
		if err != nil {
			t.Fatal(err)
		}
		booted = append(booted, n)
	}
	if want := []int64{2, 2, 2, 1, 1}; !reflect.DeepEqual(booted, want) {
		t.Errorf("booted %v, want %v", booted, want)
	}
	es, _ := e.Entries()
	if len(es) != 2 || es[0].Name != "roost-rev-2+0-3.conf" {
		t.Errorf("entries %v", es)
	}
	if f, _ := e.Failed(1); len(f) != 1 || f[0].Number != 2 {
		t.Errorf("failed %v", f)
	}
	// Blessed entries boot uncounted, the newest first.
	e2 := newESP(t)
	touch(t, e2, "roost-rev-3.conf", "roost-rev-2.conf")
	for range 2 {
		if n, _ := e2.FakeBoot(); n != 3 {
			t.Errorf("booted %d, want 3", n)
		}
	}
}

func TestFakeUnitsDefault(t *testing.T) {
	u := &FakeUnits{}
	if st, _ := u.ActiveState(context.Background(), "x.service"); st != "inactive" {
		t.Errorf("unknown unit %q, want inactive", st)
	}
	u.Default = "active"
	u.Set("y.service", "failed")
	if err := CheckUnits(context.Background(), u, []string{"x.service", "z.service"}); err != nil {
		t.Errorf("default active: %v", err)
	}
	if st, _ := u.ActiveState(context.Background(), "y.service"); st != "failed" {
		t.Errorf("set unit %q, want failed", st)
	}
}
