package api

import (
	"strings"
	"testing"

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
