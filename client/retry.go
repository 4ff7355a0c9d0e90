package client

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
)

// Backoff between the attempts of retryUnavailable and retryWrite
// (variables for tests).
var (
	retryBaseDelay = 250 * time.Millisecond
	retryMaxDelay  = 2 * time.Second
)

// unsentAttempts is how many times a write that no member could be reached
// for is tried (connection refused: fail fast, as gRPC's own retries of
// reads do), and writeAttemptsWithoutDeadline how many times a write
// without a deadline is tried in all.
const (
	unsentAttempts               = 5
	writeAttemptsWithoutDeadline = 5
)

// retryUnavailable retries a unary call that a member answered with
// UNAVAILABLE (the hub electing a leader: "no hub leader elected yet;
// retry") until the call's deadline, so a client's timeout (e.g. roostctl
// --timeout) covers a leader election, which outlasts gRPC's own retries
// (at most 5 attempts within about 2 s). Writes (IsWrite) go to
// retryWrite, which retries only what is known not to be applied, or what
// carries a request ID. For reads, calls without a deadline, and calls no
// member could be reached for (connection refused: fail fast), are not
// retried beyond gRPC's.
func retryUnavailable(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if IsWrite(method) {
		return retryWrite(ctx, method, req, reply, cc, invoker, opts...)
	}
	deadline, ok := ctx.Deadline()
	delay := retryBaseDelay
	var unavailable error // the last UNAVAILABLE: says more than the deadline running out during a retry
	for {
		var answered peer.Peer // set when a member answered (not when none could be reached)
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&answered))...)
		if status.Code(err) == codes.DeadlineExceeded && unavailable != nil {
			return unavailable
		}
		if status.Code(err) != codes.Unavailable || !ok || answered.Addr == nil {
			return err
		}
		unavailable = err
		if !sleepBackoff(ctx, deadline, &delay) {
			return err
		}
	}
}

// sleepBackoff waits a jittered delay (as gRPC's backoff) and doubles
// *delay up to retryMaxDelay; false when the deadline (zero: none) leaves
// no room for another attempt or ctx ends.
func sleepBackoff(ctx context.Context, deadline time.Time, delay *time.Duration) bool {
	wait := *delay/2 + rand.N(*delay/2+1)
	if !deadline.IsZero() && time.Until(deadline) < wait+100*time.Millisecond {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
	}
	*delay = min(2**delay, retryMaxDelay)
	return true
}

// Outcome is what a failed write's attempt says about the write.
type Outcome int

const (
	// Answered: the hub answered (success, or a refusal that changed
	// nothing: NotFound, FailedPrecondition, AlreadyExists, …).
	Answered Outcome = iota
	// NotApplied: the write was refused before it was proposed (the hub
	// said so: apierror.ReasonNotApplied), or never left this client (no
	// connection to any member): sending it again is safe.
	NotApplied
	// Unknown: the write may have reached the leader and nobody knows
	// whether it was applied (apierror.ReasonOutcomeUnknown; or the call
	// failed with Unavailable, DeadlineExceeded, Canceled, Unknown or
	// Internal after it was sent: the connection dropped, the member was
	// killed, the deadline passed while the write committed).
	Unknown
)

// OutcomeOf classifies err, the error of one attempt of a write; sent says
// whether the attempt got onto a connection to a member (grpc.Peer set).
func OutcomeOf(err error, sent bool) Outcome {
	if err == nil {
		return Answered
	}
	switch apierror.ReasonOf(err) {
	case apierror.ReasonNotApplied:
		return NotApplied
	case apierror.ReasonOutcomeUnknown:
		return Unknown
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		if !sent {
			return NotApplied
		}
		return Unknown
	case codes.Unknown, codes.Internal:
		if sent {
			return Unknown
		}
		// A local failure before sending (the request did not encode):
		// not applied, and no retry would help.
	}
	return Answered
}

// OutcomeUnknownError is a write's error when an attempt may have been
// applied and no later attempt settled it: the hub may or may not hold
// the change. Err is the last attempt's error (a gRPC status error);
// RequestID the write's request ID ("" when it had none), with which the
// write can be sent again safely while the hub remembers it (an hour).
type OutcomeUnknownError struct {
	Err       error
	RequestID string
}

func (e *OutcomeUnknownError) Error() string {
	return "the outcome of the write is unknown (the hub may have applied it): " + e.Err.Error()
}

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// GRPCStatus reports the write as code Unknown with
// apierror.ReasonOutcomeUnknown, whatever the last attempt's code was.
func (e *OutcomeUnknownError) GRPCStatus() *status.Status {
	return apierror.OutcomeUnknown("%s", status.Convert(e.Err).Message()).GRPCStatus()
}

// retryWrite sends a write and retries it only when that cannot apply it
// twice: after attempts the hub refused before proposing, or that never
// left this client, until the deadline; after an attempt of unknown
// outcome only when the call carries a request ID (which the hub applies
// at most once), and otherwise returns an *OutcomeUnknownError at once.
// Once an attempt's outcome was unknown, only a success settles the write;
// any other end (a refusal, which may be because the first attempt was
// applied; the deadline) is an *OutcomeUnknownError. Later attempts carry
// x-roost-attempt so that a hub that cannot deduplicate refuses them.
func retryWrite(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	deadline, _ := ctx.Deadline()
	id := RequestIDOf(ctx)
	delay := retryBaseDelay
	var (
		uncertain bool  // an attempt may have been applied
		last      error // the error to report: the last one, unless that is the deadline running out during a retry
		unsent    int
	)
	result := func() error {
		if uncertain {
			return &OutcomeUnknownError{Err: last, RequestID: id}
		}
		return last
	}
	for attempt := 1; ; attempt++ {
		actx := ctx
		if uncertain {
			actx = withAttempt(ctx, attempt)
		}
		var p peer.Peer
		err := invoker(actx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
		if err == nil {
			return nil
		}
		sent := p.Addr != nil
		if last == nil || status.Code(err) != codes.DeadlineExceeded {
			last = err
		}
		switch OutcomeOf(err, sent) {
		case Answered:
			return result()
		case NotApplied:
			if c := status.Code(err); c == codes.DeadlineExceeded || c == codes.Canceled {
				return result() // the time ran out before the attempt was sent
			}
			if unsent += btoi(!sent); unsent >= unsentAttempts && !uncertain {
				return result() // no member can be reached: fail fast
			}
		case Unknown:
			uncertain = true
			if id == "" {
				return result()
			}
		}
		if deadline.IsZero() && attempt >= writeAttemptsWithoutDeadline {
			return result()
		}
		if !sleepBackoff(ctx, deadline, &delay) {
			return result()
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
