package bmc

import (
	"context"
	"errors"
)

// Sentinels that errors of a BMC wrap, one for each condition reason.
var (
	// ErrUnauthorized: the BMC refused the credentials (HTTP 401 or 403).
	ErrUnauthorized = errors.New("credentials refused")
	// ErrTimeout: the BMC did not answer in time.
	ErrTimeout = errors.New("timed out")
	// ErrUnreachable: no connection (refused, no route, DNS, TLS handshake).
	ErrUnreachable = errors.New("unreachable")
	// ErrCertificate: the BMC's TLS certificate is not trusted.
	ErrCertificate = errors.New("certificate not trusted")
	// ErrNotFound: the system, manager or drive named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnsupported: the BMC lacks the action or value asked for.
	ErrUnsupported = errors.New("not supported")
	// ErrRejected: the BMC refused the request (HTTP 4xx other than above).
	ErrRejected = errors.New("request rejected")
	// ErrServer: the BMC failed (HTTP 5xx).
	ErrServer = errors.New("BMC error")
)

// Condition reasons returned by Reason.
const (
	ReasonUnauthorized = "Unauthorized"
	ReasonTimeout      = "Timeout"
	ReasonUnreachable  = "Unreachable"
	ReasonCertificate  = "CertificateNotTrusted"
	ReasonNotFound     = "NotFound"
	ReasonUnsupported  = "Unsupported"
	ReasonRejected     = "Rejected"
	ReasonServerError  = "ServerError"
	ReasonError        = "Error"
)

// Reason is the CamelCase condition reason for err (e.g. for
// BMCReachable=False): ReasonUnauthorized, ReasonTimeout, … or ReasonError
// for an error that wraps none of the sentinels. Reason(nil) is "".
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnauthorized):
		return ReasonUnauthorized
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, ErrCertificate):
		return ReasonCertificate
	case errors.Is(err, ErrUnreachable):
		return ReasonUnreachable
	case errors.Is(err, ErrNotFound):
		return ReasonNotFound
	case errors.Is(err, ErrUnsupported):
		return ReasonUnsupported
	case errors.Is(err, ErrRejected):
		return ReasonRejected
	case errors.Is(err, ErrServer):
		return ReasonServerError
	}
	return ReasonError
}
