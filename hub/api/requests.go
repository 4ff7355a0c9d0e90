package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// incoming returns the last value of key in ctx's incoming metadata.
func incoming(ctx context.Context, key string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(key); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// requestID returns the client's request ID of the call in ctx
// (client.RequestIDKey), "" when it sent none.
func requestID(ctx context.Context) string { return incoming(ctx, client.RequestIDKey) }

// withRequest makes cmd carry the request ID of the call in ctx, with the
// fingerprint of req (the call's request message), so that the FSM applies
// the request at most once (state.RulesRequestIDs): a retry returns the
// first command's result. Call it for the one command that carries a
// write out, just before proposing it. sub tells apart several commands
// of one request ("" for the first; e.g. "2" for a second draw), which
// get IDs of their own.
//
// Errors: InvalidArgument for an ID longer than state.MaxRequestIDBytes;
// FailedPrecondition for a retry (client.AttemptKey ≥ 2) while a member
// implements apply rules without request IDs, which could apply the write
// a second time: the client then reports the outcome as unknown.
func (s *Server) withRequest(ctx context.Context, cmd *roostv1.Command, req proto.Message, sub string) error {
	id := requestID(ctx)
	if id == "" {
		return nil
	}
	if len(id) > state.MaxRequestIDBytes {
		return apierror.Invalid("invalid request ID", apierror.Violation{Field: client.RequestIDKey,
			Message: fmt.Sprintf("is %d bytes long; at most %d allowed", len(id), state.MaxRequestIDBytes)})
	}
	if n, _ := strconv.Atoi(incoming(ctx, client.AttemptKey)); n >= 2 && state.EffectiveRules(s.fsm.Members()) < state.RulesRequestIDs {
		return apierror.FailedPrecondition("not retrying request %s: an earlier attempt may have been applied, and a hub member runs a roost-hub "+
			"too old to apply a request at most once (apply rules < %d; see 'roostctl hub members')", id, state.RulesRequestIDs)
	}
	if sub != "" {
		id += "/" + sub
	}
	cmd.RequestId, cmd.RequestFingerprint = id, fingerprint(ctx, req)
	return nil
}

// fingerprint is the hex SHA-256 of the call's full method name and its
// request message (deterministic encoding).
func fingerprint(ctx context.Context, req proto.Message) string {
	method, _ := grpc.Method(ctx)
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// priorRequest returns the record of the request in ctx when this member
// has applied it before (its request ID recorded with req's fingerprint):
// for handlers whose checks before proposing would refuse a retry of a
// request that was applied (the object it deleted is gone), so that they
// answer with the first result instead. The leader's state may lag the
// log for a moment after an election: a request not found here is still
// deduplicated when its command is applied.
func (s *Server) priorRequest(ctx context.Context, req proto.Message) (*roostv1.RequestRecord, bool) {
	id := requestID(ctx)
	if id == "" {
		return nil, false
	}
	rec, ok := s.fsm.RequestRecord(id)
	if !ok || rec.GetFingerprint() != fingerprint(ctx, req) {
		return nil, false
	}
	return rec, true
}

// proposeRequest is Propose for the command that carries out the request
// req of the call in ctx (withRequest, sub "").
func (s *Server) proposeRequest(ctx context.Context, req proto.Message, cmd *roostv1.Command) (*state.ApplyResult, error) {
	if err := s.withRequest(ctx, cmd, req, ""); err != nil {
		return nil, err
	}
	return s.Propose(ctx, cmd)
}
