package api

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestOlderMemberRefused(t *testing.T) {
	members := []*roostv1.HubMember{
		{Id: "a", HubVersion: "v0.4.0", RulesVersion: 2},
		{Id: "b", HubVersion: "v0.4.1", RulesVersion: 2},
		{Id: "c", HubVersion: "v0.4.0", RulesVersion: 2},
	}
	for _, v := range []uint32{2, 3} {
		if err := olderMemberError(members, 2, v, "rulesVersion"); err != nil {
			t.Errorf("a member with rules %d: %v", v, err)
		}
	}
	for _, v := range []uint32{0, 1} { // 0: a roost-hub that does not send its version
		e := apierror.FromError(olderMemberError(members, 2, v, "rulesVersion"))
		if e == nil || e.Code != codes.FailedPrecondition || len(e.Violations) != 1 || e.Violations[0].Field != "rulesVersion" ||
			!strings.Contains(e.Violations[0].Message, "up to version 1, and the hub applies version 2") ||
			!strings.Contains(e.Violations[0].Message, "(v0.4.0, v0.4.1;") {
			t.Errorf("a member with rules %d: %v, want FailedPrecondition naming rulesVersion and the members' versions", v, e)
		}
	}
	if err := olderMemberError(members, 1, 0, "rulesVersion"); err != nil {
		t.Errorf("rules 1 hub, member without a version: %v", err)
	}
}

func TestMemberIDAndRaftAddressConflicts(t *testing.T) {
	servers := []raft.Server{
		{ID: "hub-a", Address: "10.0.0.1:7444", Suffrage: raft.Voter},
		{ID: "hub-b", Address: "10.0.0.2:7444", Suffrage: raft.Voter},
	}
	for _, tc := range []struct {
		what     string
		err      error
		wantText []string // nil: no error
	}{
		{"join as a new ID", joinIDInUse(servers, "hub-c"), nil},
		{"join as an existing ID", joinIDInUse(servers, "hub-b"), []string{`"hub-b"`, "10.0.0.2:7444", "--node-id", "roostctl hub remove hub-b"}},
		{"add a new member", voterConflict(servers, "hub-c", "10.0.0.3:7444"), nil},
		{"add a member again at its address (a retry)", voterConflict(servers, "hub-b", "10.0.0.2:7444"), nil},
		{"add an existing ID at another address", voterConflict(servers, "hub-b", "10.0.0.3:7444"),
			[]string{"hub-b", "10.0.0.2:7444", "10.0.0.3:7444", "--node-id", "roostctl hub remove hub-b"}},
		{"add a new ID at an existing address", voterConflict(servers, "hub-c", "10.0.0.2:7444"),
			[]string{"10.0.0.2:7444", "hub-b", "--raft-addr", "roostctl hub remove hub-b"}},
	} {
		if tc.wantText == nil {
			if tc.err != nil {
				t.Errorf("%s: %v", tc.what, tc.err)
			}
			continue
		}
		if apierror.Code(tc.err) != codes.FailedPrecondition {
			t.Errorf("%s: %v, want FailedPrecondition", tc.what, tc.err)
			continue
		}
		for _, w := range tc.wantText {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.what, tc.err, w)
			}
		}
	}
}

// Join refuses another member's Raft address, spelt as given or as the
// same IP and port; a join without one (an older roost-hub) is not
// checked.
func TestJoinRaftAddressInUse(t *testing.T) {
	servers := []raft.Server{
		{ID: "hub-a", Address: "127.0.0.1:7444", Suffrage: raft.Voter},
		{ID: "hub-b", Address: "[::1]:7444", Suffrage: raft.Voter},
	}
	for _, tc := range []struct {
		id, addr string
		inUseBy  string // "": no error
	}{
		{"hub-c", "", ""},
		{"hub-c", "127.0.0.1:7445", ""},
		{"hub-c", "127.0.0.2:7444", ""},
		{"hub-c", "127.0.0.1:7444", "hub-a"},
		{"hub-c", "[::ffff:127.0.0.1]:7444", "hub-a"},
		{"hub-c", "127.0.0.1:07444", "hub-a"},
		{"hub-c", "[0:0:0:0:0:0:0:1]:7444", "hub-b"},
		{"hub-c", "localhost:7444", "hub-a"}, // resolves to 127.0.0.1 (and ::1)
		{"hub-a", "127.0.0.1:7444", ""},      // the same ID: joinIDInUse refuses it first
	} {
		err := joinRaftAddressInUse(servers, tc.id, tc.addr)
		if tc.inUseBy == "" {
			if err != nil {
				t.Errorf("join %s at %q: %v", tc.id, tc.addr, err)
			}
			continue
		}
		if apierror.Code(err) != codes.FailedPrecondition {
			t.Errorf("join %s at %q: %v, want FailedPrecondition", tc.id, tc.addr, err)
			continue
		}
		for _, w := range []string{"Raft address " + tc.addr + " is in use", "member " + tc.inUseBy, "--raft-addr", "roostctl hub remove " + tc.inUseBy} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("join %s at %q: %q does not say %q", tc.id, tc.addr, err, w)
			}
		}
	}
}

func TestSameHostPort(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"10.0.0.1:7444", "10.0.0.1:7444", true},
		{"10.0.0.1:7444", "10.0.0.1:7443", false},
		{"10.0.0.1:7444", "10.0.0.2:7444", false},
		{"hub.example:7444", "HUB.example:7444", true},
		{"127.0.0.1:7444", "[::ffff:127.0.0.1]:7444", true},
		{"localhost:7444", "127.0.0.1:7444", true},
		{"localhost:7444", "127.0.0.1:7443", false},
		{"nonsense", "nonsense", true},
		{"nonsense", "10.0.0.1:7444", false},
		{"no-such-host.invalid:7444", "10.0.0.1:7444", false},
	} {
		if got := SameHostPort(tc.a, tc.b); got != tc.want {
			t.Errorf("SameHostPort(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
