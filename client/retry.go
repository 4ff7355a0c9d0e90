package client

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Backoff between the attempts of retryUnavailable.
const (
	retryBaseDelay = 250 * time.Millisecond
	retryMaxDelay  = 2 * time.Second
)

// retryUnavailable retries a unary call that a member answered with
// UNAVAILABLE (the hub electing a leader: "no hub leader elected yet;
// retry") until the call's deadline, so a client's timeout (e.g. roostctl
// --timeout) covers a leader election, which outlasts gRPC's own retries
// (at most 5 attempts within about 2 s). Calls without a deadline, and
// calls no member could be reached for (connection refused: fail fast),
// are not retried beyond gRPC's. The hub answers UNAVAILABLE for Raft
// errors that guarantee nothing entered the log, and UNKNOWN (not retried)
// when leadership was lost while a write was committing.
func retryUnavailable(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
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
		wait := delay/2 + rand.N(delay/2+1) // jittered, as gRPC's backoff
		if time.Until(deadline) < wait+100*time.Millisecond {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		delay = min(2*delay, retryMaxDelay)
	}
}
