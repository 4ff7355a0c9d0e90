package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/raftnode"
)

func TestToStatusMapsEveryErrorOnce(t *testing.T) {
	cases := []struct {
		err  error
		want codes.Code
	}{
		{raft.ErrNotLeader, codes.Unavailable},
		{fmt.Errorf("apply: %w", raft.ErrLeadershipLost), codes.Unknown},
		{raft.ErrRaftShutdown, codes.Unavailable},
		{apierror.NotFound("Pool", "x"), codes.NotFound},
		{apierror.Invalid("bad", apierror.Violation{Field: "objects[0].metadata.name", Message: "required"}), codes.InvalidArgument},
		{apierror.FailedPrecondition("in use"), codes.FailedPrecondition},
		{apierror.Aborted("pool/workers: modified since it was read (modifyIndex 4, now 7): ...",
			apierror.Violation{Field: "objects[0].metadata.modifyIndex", Message: "modified since it was read (modifyIndex 4, now 7)"}), codes.Aborted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied},
		{errors.New("boom"), codes.Internal},
	}
	for _, c := range cases {
		if got := status.Code(toStatus(c.err)); got != c.want {
			t.Errorf("toStatus(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) != nil")
	}
	// Field violations survive the round trip to the client.
	e := apierror.FromError(toStatus(apierror.Invalid("bad", apierror.Violation{Field: "objects[1].spec.cluster", Message: "required", Hint: "name a Cluster"})))
	if len(e.Violations) != 1 || e.Violations[0].Field != "objects[1].spec.cluster" || e.Violations[0].Hint != "name a Cluster" {
		t.Errorf("violations lost: %+v", e.Violations)
	}
}

func TestJoinTokenFormat(t *testing.T) {
	fp := fmt.Sprintf("%064x", 7)
	tok, err := newJoinToken(fp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseJoinToken(tok.String())
	if err != nil || got != tok {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range []string{"", "R1abc::x.y", tok.String() + "0", "R2" + tok.String()[2:]} {
		if _, err := ParseJoinToken(bad); err == nil {
			t.Errorf("ParseJoinToken(%q) accepted", bad)
		}
	}
	if tok.SecretSHA256() == tok.Secret {
		t.Error("secret stored in clear")
	}
}

// toStatus says what became of a write, in a reason that survives the trip
// to the client (and through a forwarding member, which passes statuses on).
func TestToStatusReasons(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{raft.ErrNotLeader, codes.Unavailable, apierror.ReasonNotApplied},
		{raft.ErrLeadershipTransferInProgress, codes.Unavailable, apierror.ReasonNotApplied},
		{raft.ErrEnqueueTimeout, codes.Unavailable, apierror.ReasonNotApplied},
		{&raftnode.OutcomeUnknownError{Err: raft.ErrLeadershipLost}, codes.Unknown, apierror.ReasonOutcomeUnknown},
		{&raftnode.OutcomeUnknownError{Err: raft.ErrRaftShutdown}, codes.Unknown, apierror.ReasonOutcomeUnknown},
		{&raftnode.OutcomeUnknownError{Err: context.DeadlineExceeded}, codes.Unknown, apierror.ReasonOutcomeUnknown},
		{apierror.NotApplied("no hub leader elected yet; retry"), codes.Unavailable, apierror.ReasonNotApplied},
		{apierror.FailedPrecondition("in use"), codes.FailedPrecondition, ""},
	} {
		st := toStatus(c.err)
		// As the client receives it: a status error rebuilt from the wire form.
		wire := status.FromProto(status.Convert(st).Proto()).Err()
		if status.Code(wire) != c.code || apierror.ReasonOf(wire) != c.reason || apierror.FromError(wire).Reason != c.reason {
			t.Errorf("toStatus(%v) = %v, reason %q; want %v, %q", c.err, wire, apierror.ReasonOf(wire), c.code, c.reason)
		}
		// Passed on again by a forwarding member.
		if again := toStatus(wire); apierror.ReasonOf(again) != c.reason {
			t.Errorf("forwarded %v lost its reason", c.err)
		}
	}
}
