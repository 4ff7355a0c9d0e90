package api

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Member health as ListMembers reports it (Member.health).
const (
	MemberHealthy     = "Healthy"
	MemberUnhealthy   = "Unhealthy"
	MemberUnreachable = "Unreachable"
)

// memberProbeTimeout bounds the health check of one member by ListMembers.
const memberProbeTimeout = time.Second

// probeMembers sets the health of members as this member sees them: its
// own from Config.Health, the others' from the standard gRPC health
// service on their API address (grpc.health.v1.Health/Check), all at once,
// within memberProbeTimeout.
func (s *Server) probeMembers(ctx context.Context, members []*roostv1.Member) {
	var wg sync.WaitGroup
	for _, m := range members {
		if m.GetId() == s.node.ID() {
			m.Health = MemberHealthy
			if s.health != nil {
				if err := s.health(); err != nil {
					m.Health, m.HealthMessage = MemberUnhealthy, err.Error()
				}
			}
			continue
		}
		if m.GetApiAddress() == "" {
			m.Health, m.HealthMessage = MemberUnreachable, "its API address is not recorded yet"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Health, m.HealthMessage = s.probeMember(ctx, m.GetApiAddress())
		}()
	}
	wg.Wait()
}

// probeMember checks the member at API address addr: Healthy when its
// health service says SERVING, Unhealthy (with the reason it gives) when it
// answers otherwise, Unreachable when it does not answer in time.
func (s *Server) probeMember(ctx context.Context, addr string) (health, message string) {
	conn, err := s.peerConn(addr)
	if err != nil {
		return MemberUnreachable, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, memberProbeTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	switch {
	case err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
		return MemberHealthy, ""
	case err == nil:
		return MemberUnhealthy, "its health service says " + resp.GetStatus().String() + " (its /healthz says why)"
	case ctx.Err() != nil:
		return MemberUnreachable, "no answer within " + memberProbeTimeout.String()
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unavailable {
		return MemberUnhealthy, st.Message()
	}
	return MemberUnreachable, status.Convert(err).Message()
}
