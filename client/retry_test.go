package client

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
)

// attempt is what one call of fakeInvoker does: its error, and whether it
// got onto a connection (sets the grpc.Peer call option).
type attempt struct {
	err  error
	sent bool
}

// fakeInvoker answers the calls with attempts in turn (the last one
// repeats) and records the request ID and attempt number each carried.
type fakeInvoker struct {
	attempts []attempt
	ids      []string
	numbers  []string
}

func (f *fakeInvoker) invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	md, _ := metadata.FromOutgoingContext(ctx)
	f.ids = append(f.ids, RequestIDOf(ctx))
	f.numbers = append(f.numbers, last(md.Get(AttemptKey)))
	a := f.attempts[min(len(f.ids), len(f.attempts))-1]
	if a.sent {
		for _, o := range opts {
			if p, ok := o.(grpc.PeerCallOption); ok {
				p.PeerAddr.Addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7443}
			}
		}
	}
	return a.err
}

func last(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

const applyMethod = "/roost.v1.HubService/Apply"

func fastRetries(t *testing.T) {
	base, most := retryBaseDelay, retryMaxDelay
	retryBaseDelay, retryMaxDelay = 10*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { retryBaseDelay, retryMaxDelay = base, most })
}

// callWrite runs a write through addRequestID and retryUnavailable, as Dial
// chains them, with a deadline of timeout (0: none) and ctx's request IDs.
func callWrite(ctx context.Context, f *fakeInvoker, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return addRequestID(ctx, applyMethod, nil, nil, nil, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return retryUnavailable(ctx, method, req, reply, cc, f.invoke, opts...)
	})
}

var (
	notApplied = apierror.NotApplied("no hub leader elected yet; retry").GRPCStatus().Err()
	dropped    = status.Error(codes.Unavailable, "error reading from server: EOF")
	refused    = status.Error(codes.Unavailable, "connection refused")
	hubUnknown = apierror.OutcomeUnknown("leadership lost while committing").GRPCStatus().Err()
	inUse      = apierror.FailedPrecondition("in use").GRPCStatus().Err()
)

func TestRetryWrite(t *testing.T) {
	fastRetries(t)
	for _, c := range []struct {
		name     string
		attempts []attempt
		noID     bool
		timeout  time.Duration
		calls    int        // 0: any number
		want     codes.Code // of the returned error
		unknown  bool       // an *OutcomeUnknownError
	}{
		{name: "not applied, then applied", attempts: []attempt{{notApplied, true}, {nil, true}}, timeout: time.Second, calls: 2, want: codes.OK},
		{name: "dropped after sending, retried with its ID", attempts: []attempt{{dropped, true}, {nil, true}}, timeout: time.Second, calls: 2, want: codes.OK},
		{name: "the hub's unknown, retried with its ID", attempts: []attempt{{hubUnknown, true}, {nil, true}}, timeout: time.Second, calls: 2, want: codes.OK},
		{name: "dropped after sending, no ID", attempts: []attempt{{dropped, true}}, noID: true, timeout: time.Second, calls: 1, want: codes.Unknown, unknown: true},
		{name: "refused after an unknown attempt", attempts: []attempt{{dropped, true}, {inUse, true}}, timeout: time.Second, calls: 2, want: codes.Unknown, unknown: true},
		{name: "no leader after an unknown attempt, until the deadline", attempts: []attempt{{dropped, true}, {notApplied, true}}, timeout: 300 * time.Millisecond, want: codes.Unknown, unknown: true},
		{name: "no leader until the deadline", attempts: []attempt{{notApplied, true}}, timeout: 300 * time.Millisecond, want: codes.Unavailable},
		{name: "no member reachable: fail fast", attempts: []attempt{{refused, false}}, timeout: 10 * time.Second, calls: unsentAttempts, want: codes.Unavailable},
		{name: "deadline before sending", attempts: []attempt{{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false}}, timeout: time.Second, calls: 1, want: codes.DeadlineExceeded},
		{name: "deadline after sending", attempts: []attempt{{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true}}, noID: true, timeout: time.Second, calls: 1, want: codes.Unknown, unknown: true},
		{name: "refused", attempts: []attempt{{inUse, true}}, timeout: time.Second, calls: 1, want: codes.FailedPrecondition},
		{name: "no deadline", attempts: []attempt{{notApplied, true}}, calls: writeAttemptsWithoutDeadline, want: codes.Unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeInvoker{attempts: c.attempts}
			ctx := context.Background()
			if c.noID {
				// A connection without the request ID interceptor's ID:
				// call retryUnavailable directly.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.timeout)
				defer cancel()
				err := retryUnavailable(ctx, applyMethod, nil, nil, nil, f.invoke)
				check(t, f, err, c.calls, c.want, c.unknown)
				return
			}
			err := callWrite(ctx, f, c.timeout)
			check(t, f, err, c.calls, c.want, c.unknown)
			for i, id := range f.ids {
				if id == "" || id != f.ids[0] {
					t.Errorf("attempt %d carried request ID %q, the first %q", i+1, id, f.ids[0])
				}
			}
		})
	}
}

func check(t *testing.T, f *fakeInvoker, err error, calls int, want codes.Code, unknown bool) {
	t.Helper()
	if calls > 0 && len(f.ids) != calls {
		t.Errorf("%d attempts, want %d", len(f.ids), calls)
	}
	if got := status.Code(err); got != want {
		t.Errorf("error %v (code %v), want code %v", err, got, want)
	}
	var u *OutcomeUnknownError
	if errors.As(err, &u) != unknown {
		t.Errorf("error %v: OutcomeUnknownError %v, want %v", err, !unknown, unknown)
	}
	if unknown && apierror.ReasonOf(err) != apierror.ReasonOutcomeUnknown {
		t.Errorf("error %v has reason %q", err, apierror.ReasonOf(err))
	}
	// Attempts after one of unknown outcome say so (AttemptKey), so that
	// a hub that cannot deduplicate refuses them.
	for i, n := range f.numbers {
		if i > 0 && OutcomeOf(f.attempts[min(i, len(f.attempts))-1].err, f.attempts[min(i, len(f.attempts))-1].sent) == Unknown && n == "" {
			t.Errorf("attempt %d after an unknown outcome carries no %s", i+1, AttemptKey)
		}
	}
}

func TestRequestIDsFromBase(t *testing.T) {
	ids := &RequestIDs{Base: "deploy-42"}
	ctx := WithRequestIDs(context.Background(), ids)
	var got []string
	for _, method := range []string{applyMethod, "/roost.v1.HubService/Get", "/roost.v1.HubService/CreateEnrollmentToken"} {
		_ = addRequestID(ctx, method, nil, nil, nil, func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			got = append(got, RequestIDOf(ctx))
			return nil
		})
	}
	if want := []string{"deploy-42-1", "", "deploy-42-2"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("request IDs %q, want %q (reads get none)", got, want)
	}
	// A call with its own ID keeps it.
	_ = addRequestID(WithRequestID(ctx, "mine"), applyMethod, nil, nil, nil, func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		got = append(got, RequestIDOf(ctx))
		return nil
	})
	if got[3] != "mine" {
		t.Errorf("own request ID replaced by %q", got[3])
	}
	if a, b := NewRequestID(), NewRequestID(); len(a) != 32 || a == b {
		t.Errorf("NewRequestID: %q, %q", a, b)
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		sent bool
		want Outcome
	}{
		{nil, true, Answered},
		{notApplied, true, NotApplied},
		{hubUnknown, true, Unknown},
		{dropped, true, Unknown},
		{refused, false, NotApplied},
		{status.Error(codes.Internal, "server closed the stream without sending trailers"), true, Unknown},
		{status.Error(codes.Internal, "grpc: error while marshaling"), false, Answered},
		{status.Error(codes.DeadlineExceeded, "deadline"), true, Unknown},
		{status.Error(codes.DeadlineExceeded, "deadline"), false, NotApplied},
		{inUse, true, Answered},
		{status.Error(codes.AlreadyExists, "exists"), true, Answered},
	} {
		if got := OutcomeOf(c.err, c.sent); got != c.want {
			t.Errorf("OutcomeOf(%v, sent %v) = %v, want %v", c.err, c.sent, got, c.want)
		}
	}
	if IsWrite("/roost.v1.HubService/List") || !IsWrite(applyMethod) || !IsWrite("/roost.v1.HubService/CreateJoinToken") {
		t.Error("IsWrite")
	}
}
