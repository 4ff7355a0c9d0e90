package api

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/netboot"
	"github.com/roostfleet/roost/hub/revisions"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// checkNetboot checks the network boot part of a token request: exactly
// one of a version and a channel, and an expiry.
func checkNetboot(req *roostv1.CreateEnrollmentTokenRequest) []apierror.Violation {
	nb := req.GetNetboot()
	var vs []apierror.Violation
	switch {
	case nb.GetVersion() == "" && nb.GetChannel() == "":
		vs = append(vs, apierror.Violation{Field: "netboot", Message: "give the release to boot: a version or a channel"})
	case nb.GetVersion() != "" && nb.GetChannel() != "":
		vs = append(vs, apierror.Violation{Field: "netboot", Message: "give a version or a channel, not both"})
	case nb.GetChannel() != "":
		vs = append(vs, state.ValidateChannel("netboot.channel", nb.GetChannel())...)
	}
	if req.GetTtlSeconds() == 0 {
		vs = append(vs, apierror.Violation{Field: "ttlSeconds", Message: "a network boot token must expire, and its URL with it: give a lifetime (e.g. 24h)"})
	}
	return vs
}

// checkNetbootRelease checks, on the member the operator called, which
// signs the URL, that it has a boot listener and that the release a
// network boot token would boot is known now: the version's
// ImageRelease, or one in the channel.
func (s *Server) checkNetbootRelease(nb *roostv1.NetbootSelector) error {
	if s.netbootURL == nil {
		return apierror.FailedPrecondition("this hub member serves no network boot: start roost-hub with --boot-addr (and --boot-url)")
	}
	if v := nb.GetVersion(); v != "" {
		if _, err := s.fsm.Get("ImageRelease", ImageReleaseName(v)); err != nil {
			return apierror.FailedPrecondition("no ImageRelease of version %s (roostctl image push BUNDLE_DIR; roostctl image list)", v)
		}
		return nil
	}
	objs, _, err := s.fsm.List("ImageRelease", "")
	if err != nil {
		return err
	}
	if revisions.PickRelease(objs, "", nb.GetChannel()) == nil {
		return apierror.FailedPrecondition("no ImageRelease is promoted to channel %s (roostctl image promote VERSION %s)", nb.GetChannel(), nb.GetChannel())
	}
	return nil
}

// netbootToken replaces the secret of the drawn token "<id>.<secret>" by
// the one derived from its id with the hub CA key (netboot.Token).
func (s *Server) netbootToken(drawn string) (string, error) {
	id, _, ok := strings.Cut(drawn, ".")
	if !ok {
		return "", fmt.Errorf("drawn token is malformed")
	}
	authority, err := s.authority()
	if err != nil {
		return "", err
	}
	return netboot.Token(authority, id)
}

// waitForObject waits until this member has applied the object kind/name
// (made through the leader), polling every 10ms for at most 5 seconds.
// Error: Unavailable, saying the object exists on the leader.
func (s *Server) waitForObject(ctx context.Context, kind, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		if _, err := s.fsm.Get(kind, name); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return apierror.Unavailable("%s %s was created, but this member has not applied it yet; retry", kind, name)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
