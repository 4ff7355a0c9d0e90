package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/agentconn"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/fleetmetrics"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Enroll checks the request at the edge, then on the leader checks the
// token against its state (so a refusal writes nothing to Raft), records
// the Server in one Raft command (whose apply checks the token again,
// where concurrent uses race), and signs the agent's key with the
// Server's name as common name. An unknown token and a wrong secret get
// the same refusal (state.EnrollmentTokenRefused). Refusals are counted
// and logged, sampled, by the member the agent called.
func (s *Server) Enroll(ctx context.Context, req *roostv1.EnrollRequest) (resp *roostv1.EnrollResponse, err error) {
	defer func() {
		s.guard.refusedCall(ctx, "/roost.v1.AgentService/Enroll", err, state.EnrollmentTokenRefused,
			func(*status.Status) bool { return false },
			func(st *status.Status) bool { return st.Code() == codes.PermissionDenied })
	}()
	if vs := ValidateEnrollRequest(req); len(vs) > 0 {
		return nil, apierror.Invalid("invalid enrollment request", vs...)
	}
	tokenName, secretSHA, _ := ParseEnrollmentToken(req.GetToken())
	authority, err := s.authority()
	if err != nil {
		return nil, err
	}
	return onLeader(ctx, s, func() (_ *roostv1.EnrollResponse, err error) {
		result := fleetmetrics.EnrollEnrolled
		defer func() {
			switch {
			case apierror.Code(err) == codes.PermissionDenied:
				result = fleetmetrics.EnrollRefused
			case err != nil:
				result = fleetmetrics.EnrollError
			}
			s.fleet.Enrolled(result)
		}()
		if err := s.checkEnrollmentToken(ctx, tokenName, secretSHA); err != nil {
			return nil, err
		}
		res, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
			TokenName: tokenName, SecretSha256: secretSHA, Identity: req.GetIdentity(), Inventory: req.GetInventory(),
			AgentVersion: req.GetAgentVersion(), Uid: uuid.NewString(),
		}}})
		if err != nil {
			return nil, err
		}
		if len(res.Results) != 1 {
			return nil, apierror.Unavailable("enrollment recorded no server; retry")
		}
		name := res.Results[0].GetName()
		cert, err := authority.SignCSR(req.GetCsrPem(), ca.Profile{CommonName: name, Role: ca.RoleAgent, Lifetime: s.agentCertLifetime}, s.now())
		if err != nil {
			return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "csrPem", Message: err.Error()})
		}
		s.RefreshFleetSize()
		s.log.Info("server enrolled", "server", name, "action", res.Results[0].GetAction(), "token", tokenName)
		if res.Results[0].GetAction() != state.ActionCreated {
			result = fleetmetrics.EnrollReenrolled
		}
		return &roostv1.EnrollResponse{ServerName: name, CertificatePem: cert, CaBundlePem: authority.CertificatePEM(), Hubs: s.hubAddresses()}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.EnrollResponse, error) {
		return roostv1.NewAgentServiceClient(c).Enroll(fctx, req)
	})
}

// checkEnrollmentToken checks an enrollment token on the leader against
// its state before anything is proposed (state.CheckEnrollmentToken at
// this member's clock), once the leader has applied its predecessors'
// entries (Config.LeaderReady).
func (s *Server) checkEnrollmentToken(ctx context.Context, name, secretSHA256 string) error {
	if s.leaderReady != nil {
		if err := s.leaderReady(ctx); err != nil {
			return apierror.Unavailable("the hub leader is not ready to check tokens yet (%v); retry", err)
		}
	}
	if aerr := state.CheckEnrollmentToken(s.fsm.EnrollmentToken(name), name, secretSHA256, timestamppb.New(s.now())); aerr != nil {
		return aerr
	}
	return nil
}

// hubAddresses are the members' API addresses, sorted.
func (s *Server) hubAddresses() []string {
	var out []string
	for _, m := range s.fsm.Members() {
		if a := m.GetApiAddress(); a != "" {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// agentHubs returns the members' API addresses as agents are told them
// (HubMembers): the same pointer while the list is unchanged. It reads the
// state at most once a second, however many agents beat.
func (s *Server) agentHubs() *[]string {
	cur := s.hubs.Load()
	now := s.now().UnixNano()
	if last := s.hubsRead.Load(); cur != nil && now-last < int64(time.Second) && now >= last {
		return cur
	}
	s.hubsRead.Store(now)
	next := s.hubAddresses()
	if cur != nil && slices.Equal(*cur, next) {
		return cur
	}
	s.hubs.CompareAndSwap(cur, &next)
	return s.hubs.Load()
}

// sendHubs sends the member list when it differs from *sent (the pointer
// agentHubs returned when it was last sent on this stream).
func (s *Server) sendHubs(as *agentconn.Stream, sent **[]string) error {
	hubs := s.agentHubs()
	if hubs == *sent || len(*hubs) == 0 {
		return nil
	}
	*sent = hubs
	return as.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Members{Members: &roostv1.HubMembers{ApiAddresses: *hubs}}})
}

// agentServer returns the Server of the calling agent (its certificate's
// common name) from this member's state, waiting briefly for a follower
// that has not applied the enrollment yet. A decommissioned Server is
// refused.
func (s *Server) agentServer(ctx context.Context, name string) (*roostv1.Server, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, err := s.fsm.Get("Server", name)
		if err == nil {
			srv := o.GetServer()
			if srv.GetStatus().GetState() == state.ServerDecommissioned {
				return nil, apierror.PermissionDenied("server %s is decommissioned (%s); enroll it again with a token to bring it back",
					name, srv.GetStatus().GetStateReason())
			}
			return srv, nil
		}
		if apierror.Code(err) != codes.NotFound || time.Now().After(deadline) {
			if apierror.Code(err) == codes.NotFound {
				// NotFound (not PermissionDenied): the agent may record its
				// Server again (Reregister).
				return nil, &apierror.Error{Code: codes.NotFound, Message: fmt.Sprintf("server %s is not enrolled: the hub has no record of it "+
					"(deleted, or a restored snapshot older than its enrollment); its agent re-registers it for an operator's approval, or enroll it again with a token", name)}
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Reregister records the calling agent's Server again when the state has
// none of its name (see AgentService.Reregister in agent.proto): the name
// comes from the agent's certificate (or, forwarded by a member, from the
// request), the identity must give that name, and the Server comes back
// PendingApproval. It refuses while a member does not know the
// ReregisterServer command (FailedPrecondition).
func (s *Server) Reregister(ctx context.Context, req *roostv1.ReregisterRequest) (*roostv1.ReregisterResponse, error) {
	role, name, _ := ca.PeerRole(ctx)
	if role == ca.RoleMember {
		name = req.GetServer()
	}
	if name == "" {
		return nil, apierror.Invalid("invalid re-registration", apierror.Violation{Field: "server", Message: "is required when a member forwards the call"})
	}
	if vs := ValidateReregisterRequest(req); len(vs) > 0 {
		return nil, apierror.Invalid("invalid re-registration", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.ReregisterResponse, error) {
		if v := state.EffectiveRules(s.fsm.Members()); v < state.RulesReregister {
			return nil, apierror.FailedPrecondition("server %s cannot re-register while a hub member runs an older roost-hub (apply rules %d, needs %d): upgrade the members, or enroll it again with a token",
				name, v, state.RulesReregister)
		}
		if _, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ReregisterServer{ReregisterServer: &roostv1.ReregisterServer{
			Name: name, Identity: req.GetIdentity(), Inventory: req.GetInventory(), AgentVersion: req.GetAgentVersion(), Uid: uuid.NewString(),
		}}}); err != nil {
			return nil, err
		}
		s.RefreshFleetSize()
		s.log.Warn("server re-registered with its certificate; it waits for an operator's approval", "server", name)
		return &roostv1.ReregisterResponse{ServerName: name}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.ReregisterResponse, error) {
		fwd := proto.Clone(req).(*roostv1.ReregisterRequest)
		fwd.Server = name
		return roostv1.NewAgentServiceClient(c).Reregister(fctx, fwd)
	})
}

// RenewCertificate signs a new key for the calling agent. The name comes
// from the caller's certificate, never from the request.
func (s *Server) RenewCertificate(ctx context.Context, req *roostv1.RenewCertificateRequest) (*roostv1.RenewCertificateResponse, error) {
	_, cn, _ := ca.PeerRole(ctx)
	if len(req.GetCsrPem()) > MaxCSRBytes {
		return nil, apierror.Invalid("certificate request too large", apierror.Violation{Field: "csrPem", Message: "too large"})
	}
	if err := checkCSR(req.GetCsrPem()); err != nil {
		return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "csrPem", Message: err.Error()})
	}
	if _, err := s.agentServer(ctx, cn); err != nil {
		return nil, err
	}
	authority, err := s.authority()
	if err != nil {
		return nil, err
	}
	cert, err := authority.SignCSR(req.GetCsrPem(), ca.Profile{CommonName: cn, Role: ca.RoleAgent, Lifetime: s.agentCertLifetime}, s.now())
	if err != nil {
		return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "csrPem", Message: err.Error()})
	}
	return &roostv1.RenewCertificateResponse{CertificatePem: cert, CaBundlePem: authority.CertificatePEM(), Hubs: s.hubAddresses()}, nil
}

// Connect serves an agent's stream (see AgentService in agent.proto). Any
// member serves it: heartbeats go to the liveness Reporter, which forwards
// them to the leader; status changes are proposed on (or forwarded to) the
// leader, and only when they differ from the recorded status.
func (s *Server) Connect(stream grpc.BidiStreamingServer[roostv1.AgentMessage, roostv1.HubMessage]) error {
	ctx := stream.Context()
	_, cn, _ := ca.PeerRole(ctx)
	first, err := recvWithin(stream, helloTimeout)
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return apierror.Invalid("the first message on the stream must be hello", apierror.Violation{Field: "hello", Message: "is required first"})
	}
	if hello.GetServerName() != cn {
		return apierror.PermissionDenied("hello names server %q but the client certificate is for %q", hello.GetServerName(), cn)
	}
	if hello.GetBootedRevision() < 0 || hello.GetLastAppliedGeneration() < 0 || len(hello.GetAgentVersion()) > MaxString {
		return apierror.Invalid("invalid hello", apierror.Violation{Field: "hello", Message: "negative revision or generation, or agent version too long"})
	}
	srv, err := s.agentServer(ctx, cn)
	if err != nil {
		return err
	}
	s.streams.Inc()
	defer s.streams.Dec()
	s.reporter.Seen(cn)

	as := agentconn.NewStream(stream.Send)
	interval := s.HeartbeatInterval()
	if err := as.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_HeartbeatIntervalSeconds{HeartbeatIntervalSeconds: int64(interval / time.Second)}}); err != nil {
		return err
	}
	var hubsSent *[]string
	if err := s.sendHubs(as, &hubsSent); err != nil {
		return err
	}
	s.agents.Register(cn, as)
	defer s.agents.Unregister(cn, as)
	if err := s.agents.Push(cn, as); err != nil {
		return err
	}
	if upd := agentconn.HelloUpdate(srv, hello); upd != nil {
		if err := retryAgentWrite(ctx, func() error { return s.updateServerStatus(ctx, upd) }); err != nil {
			return err
		}
	}
	s.log.Debug("agent connected", "server", cn, "agent", hello.GetAgentVersion())

	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		s.reporter.Seen(cn)
		switch m := msg.GetMessage().(type) {
		case *roostv1.AgentMessage_Heartbeat:
			// A Server decommissioned (or deleted) while connected loses its
			// stream at its next beat (a memdb read, no Raft traffic), with
			// PermissionDenied saying why: the agent stops reporting and
			// logs how to enroll it again.
			if st, ok := s.fsm.ServerState(cn); !ok {
				return deletedWhileConnected(cn)
			} else if st == state.ServerDecommissioned {
				_, err := s.agentServer(ctx, cn)
				return err
			}
			if iv := s.HeartbeatInterval(); iv != interval {
				interval = iv
				if err := as.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_HeartbeatIntervalSeconds{HeartbeatIntervalSeconds: int64(iv / time.Second)}}); err != nil {
					return err
				}
			}
			if err := s.sendHubs(as, &hubsSent); err != nil { // members joined or left
				return err
			}
			// a missed watch event is caught up at the next beat
			if err := s.agents.Push(cn, as); err != nil {
				return err
			}
		case *roostv1.AgentMessage_Status:
			if vs := ValidateAgentStatus(m.Status); len(vs) > 0 {
				return apierror.Invalid("invalid status", vs...)
			}
			if err := retryAgentWrite(ctx, func() error { return s.agentStatus(ctx, cn, m.Status) }); err != nil {
				if apierror.Code(err) == codes.NotFound {
					if _, ok := s.fsm.ServerState(cn); !ok {
						return deletedWhileConnected(cn)
					}
				}
				return err
			}
		case *roostv1.AgentMessage_CleaningResult:
			if vs := ValidateCleaningResult(m.CleaningResult); len(vs) > 0 {
				return apierror.Invalid("invalid cleaning result", vs...)
			}
			if err := retryAgentWrite(ctx, func() error { return s.cleaningResult(ctx, cn, m.CleaningResult) }); err != nil {
				return err
			}
		case *roostv1.AgentMessage_DataChunk:
			// an answer to ReadServerLogs or CollectServerBundle
			s.agents.Deliver(cn, as, m.DataChunk)
		case *roostv1.AgentMessage_Hello:
			return apierror.Invalid("hello may only be sent first", apierror.Violation{Field: "hello", Message: "sent twice"})
		default:
			return apierror.Invalid("empty agent message", apierror.Violation{Field: "message", Message: "is required"})
		}
	}
}

// deletedWhileConnected ends the stream of an agent whose Server was
// deleted (roostctl delete server, or a restore of an older snapshot)
// while it was connected. The Server existed when the stream opened, so
// there is no enrollment to wait for (as agentServer does for a new
// stream): the agent is told at once, with NotFound, as agentServer tells
// a new stream; the agent records its Server again (Reregister), held for
// an operator's approval. Kept out of Connect's frame (noinline): the
// stream's stack is per agent.
//
//go:noinline
func deletedWhileConnected(name string) error {
	return &apierror.Error{Code: codes.NotFound, Message: fmt.Sprintf("server %s was deleted from the hub while its agent was connected "+
		"(roostctl delete server, or a restored snapshot older than its enrollment); its agent re-registers it for an operator's approval, "+
		"or enroll it again with a token", name)}
}

// helloTimeout bounds how long a new stream may stay silent before its hello.
const helloTimeout = 30 * time.Second

// recvWithin receives one message, or fails with DeadlineExceeded after d
// (returning from the handler then ends the stream and the pending Recv).
func recvWithin(stream grpc.BidiStreamingServer[roostv1.AgentMessage, roostv1.HubMessage], d time.Duration) (*roostv1.AgentMessage, error) {
	type result struct {
		m   *roostv1.AgentMessage
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := stream.Recv()
		ch <- result{m, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-t.C:
		return nil, &apierror.Error{Code: codes.DeadlineExceeded, Message: "no hello within " + d.String() + " of opening the stream"}
	}
}

// agentStatus proposes the parts of st that differ from the recorded
// status of Server name (agentconn.Registry.StatusUpdate); it writes
// nothing when nothing changed.
func (s *Server) agentStatus(ctx context.Context, name string, st *roostv1.AgentStatus) error {
	upd, err := s.agents.StatusUpdate(name, st)
	if err != nil || upd == nil {
		return err
	}
	return s.updateServerStatus(ctx, upd)
}

// cleaningResult records the agent's cleaning result for Server name
// when it answers the cleaning the Server is in (a result of an earlier
// attempt, resent on a new stream, is dropped here without a write).
func (s *Server) cleaningResult(ctx context.Context, name string, r *roostv1.CleaningResult) error {
	o, err := s.fsm.Get("Server", name)
	if err != nil {
		return err
	}
	st := o.GetServer().GetStatus()
	if st.GetState() != state.ServerCleaning || st.GetCleaning().GetIndex() != r.GetIndex() {
		return nil
	}
	s.log.Info("cleaning result", "server", name, "index", r.GetIndex(), "succeeded", r.GetSucceeded(), "error", r.GetError())
	return s.updateServerStatus(ctx, &roostv1.UpdateServerStatus{Name: name, CleaningResult: r})
}

// ValidateCleaningResult checks an agent's cleaning result: an index, an
// error of at most 1024 bytes, at most 64 disk lines of 512 bytes.
func ValidateCleaningResult(r *roostv1.CleaningResult) []apierror.Violation {
	var vs []apierror.Violation
	if r.GetIndex() == 0 {
		vs = append(vs, apierror.Violation{Field: "cleaningResult.index", Message: "is required (the index of the CleaningInstruction)"})
	}
	if len(r.GetError()) > 1024 {
		vs = append(vs, apierror.Violation{Field: "cleaningResult.error", Message: "is longer than 1024 bytes"})
	}
	if len(r.GetDisks()) > 64 {
		vs = append(vs, apierror.Violation{Field: "cleaningResult.disks", Message: "has more than 64 lines"})
	}
	for i, d := range r.GetDisks() {
		if len(d) > 512 {
			vs = append(vs, apierror.Violation{Field: fmt.Sprintf("cleaningResult.disks[%d]", i), Message: "is longer than 512 bytes"})
		}
	}
	return vs
}

// updateServerStatus proposes upd on the leader: directly when this member
// leads, else through MemberService.ForwardServerStatus.
func (s *Server) updateServerStatus(ctx context.Context, upd *roostv1.UpdateServerStatus) error {
	_, err := onLeader(ctx, s, func() (uint64, error) {
		res, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: upd}})
		if err != nil {
			return 0, err
		}
		return res.Index, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (uint64, error) {
		resp, err := roostv1.NewMemberServiceClient(c).ForwardServerStatus(fctx, &roostv1.ForwardServerStatusRequest{Update: upd})
		return resp.GetIndex(), err
	})
	return err
}

// FetchArtifact streams a blob from offset (bytes) in chunks of
// ArtifactChunkSize; the first chunk carries the total size, and an offset
// equal to the size yields one empty chunk. A blob this member misses is
// first copied from another member (see above). Errors: InvalidArgument
// (malformed digest, negative offset or an offset past the end), NotFound
// (no member stores the blob completely), Aborted (an upload of the blob
// to this member is running), FailedPrecondition (no blob store).
func (s *Server) FetchArtifact(req *roostv1.FetchArtifactRequest, stream grpc.ServerStreamingServer[roostv1.ArtifactChunk]) error {
	if err := s.checkBlobs(); err != nil {
		return err
	}
	digest := req.GetSha256()
	f, size, err := s.blobs.Open(digest)
	if errors.Is(err, blobs.ErrNotFound) {
		if ferr := s.fillBlob(stream.Context(), digest); ferr != nil {
			if errors.Is(ferr, blobs.ErrNotFound) {
				return &apierror.Error{Code: codes.NotFound, Message: fmt.Sprintf("artifact sha256 %s is stored on no hub member "+
					"(asked %s first; %s): push it with 'roostctl image push'", digest, s.memberID(), strings.TrimPrefix(ferr.Error(), blobs.ErrNotFound.Error()+": "))}
			}
			return blobError(ferr, "sha256", digest)
		}
		f, size, err = s.blobs.Open(digest)
	}
	if err != nil {
		return blobError(err, "sha256", digest)
	}
	defer f.Close()
	off := req.GetOffset()
	if off < 0 || off > size {
		return apierror.Invalid("offset out of range", apierror.Violation{Field: "offset",
			Message: fmt.Sprintf("offset %d is outside the blob of %d bytes", off, size), Hint: fmt.Sprintf("use 0 to %d", size)})
	}
	return sendBlob(f, digest, off, size, stream)
}
