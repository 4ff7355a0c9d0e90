package state

import (
	"errors"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// errHalted stands in for the hub's exit in Options.Halt.
var errHalted = errors.New("halted")

func TestApplyHaltsOnNewerRules(t *testing.T) {
	var halted error
	h := newHarness(t, Options{Halt: func(err error) { halted = err; panic(errHalted) }})
	newer := h.objects(clusterObj("newer", nil))
	newer.RulesVersion = RulesVersion + 1
	func() {
		defer func() {
			if p := recover(); p != errHalted {
				t.Fatalf("Apply of a command with newer rules: recovered %v, want the Halt panic", p)
			}
		}()
		h.apply(newer)
	}()
	var tooNew *RulesTooNewError
	if !errors.As(halted, &tooNew) || tooNew.Index != 1 || tooNew.Needed != RulesVersion+1 || tooNew.Implemented != RulesVersion {
		t.Fatalf("Halt got %v, want a RulesTooNewError for index 1", halted)
	}
	if h.f.LastIndex() != 0 {
		t.Errorf("LastIndex = %d after the halt, want 0 (the entry is not applied)", h.f.LastIndex())
	}
	if _, err := h.f.Get("Cluster", "newer"); err == nil {
		t.Error("the command with newer rules changed the state")
	}
	t.Logf("halt: %v", halted)

	// The entry again on a build that implements it: here, commands of
	// this build's version and with no version (written before versions).
	h.idx = 0
	for i, v := range []uint32{0, RulesVersion} {
		cmd := h.objects(clusterObj("c"+string(rune('0'+i)), nil))
		cmd.RulesVersion = v
		h.mustApply(cmd)
	}
	if halted != tooNew {
		t.Errorf("Halt called again: %v", halted)
	}
}

func TestEffectiveRules(t *testing.T) {
	member := func(v uint32) *roostv1.HubMember { return &roostv1.HubMember{Id: "m", RulesVersion: v} }
	for _, tc := range []struct {
		name        string
		members     []*roostv1.HubMember
		implemented uint32
		want        uint32
	}{
		{"no members recorded", nil, 3, 3},
		{"all members on this build's rules", []*roostv1.HubMember{member(3), member(3)}, 3, 3},
		{"one member older: its rules", []*roostv1.HubMember{member(3), member(2), member(3)}, 3, 2},
		{"a member that did not report counts as 1", []*roostv1.HubMember{member(3), member(0)}, 3, 1},
		{"members newer than this build: this build's", []*roostv1.HubMember{member(5), member(4)}, 3, 3},
	} {
		if got := lowestRules(tc.members, tc.implemented); got != tc.want {
			t.Errorf("%s: lowestRules = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := EffectiveRules(nil); got != RulesVersion {
		t.Errorf("EffectiveRules(nil) = %d, want RulesVersion %d", got, RulesVersion)
	}
}

// TestDecommissionRules: the same commands under apply rules 1 and 2
// (rulesDecommission) store what each version says, so members replaying
// an old log and members applying new entries agree.
func TestDecommissionRules(t *testing.T) {
	for _, rules := range []uint32{1, rulesDecommission} {
		h := newHarness(t, Options{})
		at := func(cmd *roostv1.Command) *roostv1.Command { cmd.RulesVersion = rules; return cmd }
		inPool := func(p string) func(*roostv1.EnrollmentTokenSpec) {
			return func(s *roostv1.EnrollmentTokenSpec) { s.Pool, s.ServerLabels = p, map[string]string{"rack": "r-" + p} }
		}
		h.mustApply(at(h.objects(append(baseObjects(), poolObj("a", "prod"), poolObj("b", "prod"))...)))
		h.mustApply(at(putEnrollTokenCmd("abcdef", tokSecret, inPool("a"))))
		h.mustApply(at(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, nil)))
		h.mustApply(at(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION)))
		h.mustApply(at(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
			Changes: []*roostv1.ReachabilityChange{{Name: uuidA, Reachable: false}}}}}))
		s := getServer(t, h.f, uuidA)
		wantPool, wantReach := "a", Unreachable
		if rules >= rulesDecommission {
			wantPool, wantReach = "", ""
		}
		if s.GetSpec().GetPool() != wantPool || s.GetStatus().GetReachability() != wantReach {
			t.Errorf("rules %d, decommissioned: pool %q reachability %q, want %q %q", rules, s.GetSpec().GetPool(), s.GetStatus().GetReachability(), wantPool, wantReach)
		}
		// Enrolling again with a token for another pool.
		h.mustApply(at(putEnrollTokenCmd("ghijkl", "ghijkl.0123456789abcdef", inPool("b"))))
		h.mustApply(at(enrollCmd("ghijkl.0123456789abcdef", uuidA, []string{"52:54:00:00:00:01"}, nil)))
		s = getServer(t, h.f, uuidA)
		wantPool = "a"
		if rules >= rulesDecommission {
			wantPool = "b"
		}
		if s.GetSpec().GetPool() != wantPool || s.GetStatus().GetReachability() != Reachable || s.GetMetadata().GetLabels()["rack"] != "r-"+wantPool {
			t.Errorf("rules %d, enrolled again: pool %q reachability %q labels %v, want %q Reachable rack=r-%s", rules, s.GetSpec().GetPool(), s.GetStatus().GetReachability(), s.GetMetadata().GetLabels(), wantPool, wantPool)
		}
	}
}
