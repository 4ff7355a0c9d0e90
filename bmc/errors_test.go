package bmc

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("GET /redfish/v1: %w", ErrUnauthorized), ReasonUnauthorized},
		{fmt.Errorf("x: %w", ErrTimeout), ReasonTimeout},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), ReasonTimeout},
		{fmt.Errorf("x: %w", ErrUnreachable), ReasonUnreachable},
		{fmt.Errorf("x: %w", ErrCertificate), ReasonCertificate},
		{fmt.Errorf("x: %w", ErrNotFound), ReasonNotFound},
		{fmt.Errorf("x: %w", ErrUnsupported), ReasonUnsupported},
		{fmt.Errorf("x: %w", ErrRejected), ReasonRejected},
		{fmt.Errorf("x: %w", ErrServer), ReasonServerError},
		{errors.New("other"), ReasonError},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
