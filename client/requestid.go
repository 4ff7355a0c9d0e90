package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// RequestIDKey is the gRPC metadata key of a write's request ID. The hub
// applies a write carrying an ID at most once while it remembers the ID
// (state.RequestRecordTTL, an hour): a retry with the same ID returns the
// first result (the same token, the same Machine) instead of applying
// again. IDs are at most 128 bytes; every request needs its own.
const RequestIDKey = "x-roost-request-id"

// NewRequestID returns a fresh random request ID (32 hex digits).
func NewRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// WithRequestID returns ctx carrying id as the request ID of the calls
// made with it; a call made with such a context keeps it over all its
// attempts. Calls without one get a fresh ID per call from the
// connection's interceptor (see Dial).
func WithRequestID(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, RequestIDKey, id)
}

// RequestIDOf returns the request ID in ctx's outgoing metadata, "" for none.
func RequestIDOf(ctx context.Context) string {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v := md.Get(RequestIDKey); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// RequestIDs gives each write call made with a context from WithRequestIDs
// its request ID: Base + "-" + the call's sequence number (1, 2, …), so
// that running the same command again with the same base (roostctl
// --request-id) sends the same IDs, which the hub applies at most once.
type RequestIDs struct {
	Base string
	n    atomic.Int64
}

type requestIDsKey struct{}

// WithRequestIDs returns ctx whose write calls without a request ID of
// their own take theirs from ids (see RequestIDs).
func WithRequestIDs(ctx context.Context, ids *RequestIDs) context.Context {
	return context.WithValue(ctx, requestIDsKey{}, ids)
}

// nextRequestID returns the ID for a write call made with ctx: the next
// of ctx's RequestIDs, else a fresh random one.
func nextRequestID(ctx context.Context) string {
	ids, _ := ctx.Value(requestIDsKey{}).(*RequestIDs)
	if ids == nil || ids.Base == "" {
		return NewRequestID()
	}
	return fmt.Sprintf("%s-%d", ids.Base, ids.n.Add(1))
}

// addRequestID is Dial's outermost interceptor: it gives every write call
// without a request ID one (nextRequestID), which all its attempts share.
func addRequestID(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if IsWrite(method) && RequestIDOf(ctx) == "" {
		ctx = WithRequestID(ctx, nextRequestID(ctx))
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// reads are the unary methods that change nothing: every other method is
// treated as a write (an outcome may be unknown; a retry needs the
// request ID).
var reads = map[string]bool{
	"/roost.v1.HubService/Get":             true,
	"/roost.v1.HubService/List":            true,
	"/roost.v1.HubService/ListMembers":     true,
	"/roost.v1.HubService/ListJoinTokens":  true,
	"/roost.v1.HubService/StatArtifact":    true,
	"/roost.v1.HubService/ListTrustedKeys": true,
	"/grpc.health.v1.Health/Check":         true,
}

// IsWrite says whether the unary method (a full gRPC method name, e.g.
// "/roost.v1.HubService/Apply") may change the hub's state. Methods of
// other services than HubService's reads count as writes.
func IsWrite(method string) bool {
	return !reads[method] && !strings.HasPrefix(method, "/grpc.reflection.")
}

// AttemptKey is the gRPC metadata key retryWrite sets on a write's
// attempts after one of unknown outcome (2, 3, …): the hub refuses such a
// retry when it cannot deduplicate by request ID (members running apply
// rules older than 6), instead of applying the write a second time.
const AttemptKey = "x-roost-attempt"

func withAttempt(ctx context.Context, n int) context.Context {
	return metadata.AppendToOutgoingContext(ctx, AttemptKey, fmt.Sprint(n))
}
