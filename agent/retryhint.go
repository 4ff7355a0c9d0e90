package agent

import (
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// retryHint is the wait a hub member asked for with ResourceExhausted (the
// limits on calls without a certificate, e.g. Enroll): its
// google.rpc.RetryInfo delay plus up to a fifth more at random, so agents
// refused together do not return together; 0 for other errors.
func retryHint(err error) time.Duration {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			w := ri.GetRetryDelay().AsDuration()
			if w <= 0 {
				return 0
			}
			return w + rand.N(w/5+1)
		}
	}
	return 0
}
