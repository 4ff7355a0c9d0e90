package api

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// checkMemberRules refuses a member whose roost-hub implements apply rules
// older than those the hub proposes with (state.EffectiveRules): it could
// not apply the log. v is the member's state.RulesVersion (0 means 1);
// field names it in the error. Errors: FailedPrecondition.
func (s *Server) checkMemberRules(v uint32, field string) error {
	members := s.fsm.Members()
	return olderMemberError(members, state.EffectiveRules(members), v, field)
}

// olderMemberError is checkMemberRules for the recorded members and the
// rules version the hub applies (effective).
func olderMemberError(members []*roostv1.HubMember, effective, v uint32, field string) error {
	if max(v, 1) >= effective {
		return nil
	}
	var versions []string
	for _, m := range members {
		if hv := m.GetHubVersion(); hv != "" && !slices.Contains(versions, hv) {
			versions = append(versions, hv)
		}
	}
	slices.Sort(versions)
	return apierror.FailedPreconditionFields("this roost-hub is older than the hub's members",
		apierror.Violation{Field: field, Message: fmt.Sprintf("the member's roost-hub implements apply rules up to version %d, and the hub applies version %d: "+
			"run the roost-hub the members run (%s; see 'roostctl hub members') or newer", max(v, 1), effective, strings.Join(versions, ", "))})
}

// ReportSelf records m, this member's own HubMember, on the leader unless
// the state has it already: proposed here on the leader, else sent to the
// leader (MemberService.UpdateMember). Errors: InvalidArgument (id or
// addresses missing), NotFound (m is not in the Raft configuration, e.g.
// removed), FailedPrecondition (m's roost-hub is older than the rules the
// hub applies), Unavailable (no leader).
func (s *Server) ReportSelf(ctx context.Context, m *roostv1.HubMember) error {
	if m.GetId() == "" || m.GetRaftAddress() == "" || m.GetApiAddress() == "" {
		return apierror.Invalid("invalid member",
			apierror.Violation{Field: "member.id", Message: "required"},
			apierror.Violation{Field: "member.raftAddress", Message: "required"},
			apierror.Violation{Field: "member.apiAddress", Message: "required"})
	}
	for _, r := range s.fsm.Members() {
		if proto.Equal(r, m) {
			return nil
		}
	}
	_, err := onLeader(ctx, s, func() (*roostv1.UpdateMemberResponse, error) {
		servers, err := s.node.Servers()
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(servers, func(sv raft.Server) bool { return string(sv.ID) == m.GetId() }) {
			return nil, apierror.NotFound("hub member", m.GetId())
		}
		if err := s.checkMemberRules(m.GetRulesVersion(), "member.rulesVersion"); err != nil {
			return nil, err
		}
		_, err = s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_PutMember{PutMember: &roostv1.PutMember{Member: m}}})
		return &roostv1.UpdateMemberResponse{}, err
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.UpdateMemberResponse, error) {
		return roostv1.NewMemberServiceClient(c).UpdateMember(fctx, &roostv1.UpdateMemberRequest{Member: m})
	})
	return err
}

// joinIDInUse refuses a join (MemberService.Join) under the ID of a member
// of the Raft configuration servers: the new member's AddVoter would
// replace it. A joining member calls Join only while its data dir holds no
// Raft state, that is before it could have been added, so a retried join
// is never refused here. Errors: FailedPrecondition.
func joinIDInUse(servers []raft.Server, id string) error {
	for _, sv := range servers {
		if string(sv.ID) == id {
			return apierror.FailedPrecondition("node ID %q is in use: member %s of this hub has it (Raft address %s); "+
				"start the new member with another --node-id (and an empty data dir), or, if that member is gone for good, "+
				"remove it first with 'roostctl hub remove %s'", id, id, sv.Address, id)
		}
	}
	return nil
}

// voterConflict refuses to add member id at Raft address addr
// (MemberService.AddVoter) when another member of the configuration
// servers has that address, or member id is there at another address
// (adding it would move it there). The same ID at the same address is a
// retry and passes. Errors: FailedPrecondition.
func voterConflict(servers []raft.Server, id, addr string) error {
	for _, sv := range servers {
		switch {
		case string(sv.ID) == id && string(sv.Address) != addr:
			return apierror.FailedPrecondition("member %s of this hub has Raft address %s, not %s: "+
				"a new member needs its own --node-id (wipe its data dir and join again with another --node-id and a new token from 'roostctl hub join'); "+
				"if %s itself moved, restart it with --raft-addr %s, or remove it with 'roostctl hub remove %s' and join it again",
				id, sv.Address, addr, id, sv.Address, id)
		case string(sv.ID) != id && SameHostPort(string(sv.Address), addr):
			return apierror.FailedPrecondition("Raft address %s is member %s's: give the new member %s another --raft-addr, "+
				"or, if %s is gone for good, remove it first with 'roostctl hub remove %s'", addr, sv.ID, id, sv.ID, sv.ID)
		}
	}
	return nil
}

// joinRaftAddressInUse refuses a join (MemberService.Join) at Raft address
// addr when a member of the Raft configuration servers has it (see
// SameHostPort): its AddVoter would be refused only after the token was
// used and a certificate issued, and meanwhile the leader would replicate
// the log to the new process in that member's place. An empty addr (a
// roost-hub that does not send it) is not checked. Call it after
// joinIDInUse, so a member with the same ID is reported as such. Errors:
// FailedPrecondition.
func joinRaftAddressInUse(servers []raft.Server, id, addr string) error {
	if addr == "" {
		return nil
	}
	for _, sv := range servers {
		if string(sv.ID) != id && SameHostPort(string(sv.Address), addr) {
			return apierror.FailedPrecondition("Raft address %s is in use: member %s of this hub has it (Raft address %s, whether or not it runs now); "+
				"start the new member with another --raft-addr (and an empty data dir), or, if %s is gone for good, "+
				"remove it first with 'roostctl hub remove %s'", addr, sv.ID, sv.Address, sv.ID, sv.ID)
		}
	}
	return nil
}

// resolveTimeout bounds the name lookups of SameHostPort.
const resolveTimeout = 2 * time.Second

// SameHostPort reports whether the host:port addresses a and b name the
// same endpoint: equal as given, or with the same port (by number) and
// hosts that are the same IP (127.0.0.1 and ::ffff:127.0.0.1), or that
// resolve to a common IP (a host name and its address; at most
// resolveTimeout for the lookups, and a failed lookup counts as
// different). An address that does not parse is only equal as given.
func SameHostPort(a, b string) bool {
	if a == b {
		return true
	}
	ha, pa, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	hb, pb, err := net.SplitHostPort(b)
	if err != nil {
		return false
	}
	na, err := net.LookupPort("tcp", pa)
	if err != nil {
		return false
	}
	nb, err := net.LookupPort("tcp", pb)
	if err != nil || na != nb {
		return false
	}
	if strings.EqualFold(ha, hb) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ipsA, ipsB := hostIPs(ctx, ha), hostIPs(ctx, hb)
	for _, x := range ipsA {
		for _, y := range ipsB {
			if x.Equal(y) {
				return true
			}
		}
	}
	return false
}

// hostIPs is host's IP address, or those it resolves to; none when the
// lookup fails or host is empty.
func hostIPs(ctx context.Context, host string) []net.IP {
	if host == "" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil
	}
	out := make([]net.IP, len(addrs))
	for i, a := range addrs {
		out[i] = a.IP
	}
	return out
}
