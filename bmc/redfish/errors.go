package redfish

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/roostfleet/roost/bmc"
)

// Error is a failed Redfish request. It wraps one of the bmc package's
// sentinels (Kind), so bmc.Reason and errors.Is classify it.
type Error struct {
	// Op is the request, e.g. "POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset".
	Op string
	// Kind is a bmc sentinel: bmc.ErrUnauthorized, bmc.ErrTimeout, …
	Kind error
	// StatusCode is the HTTP status, 0 when there was no response.
	StatusCode int
	// Code and Messages are the Redfish error's code and
	// @Message.ExtendedInfo, when the BMC sent them.
	Code     string
	Messages []Message
	// Detail is the transport error or the Redfish error's message.
	Detail string
}

// Error reads e.g. "redfish: POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset:
// BMC error (HTTP 500): The request failed due to an internal service error."
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("redfish: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	b.WriteString(e.Kind.Error())
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.StatusCode)
	}
	var details []string
	for _, m := range e.Messages {
		if m.Message != "" {
			details = append(details, m.Message)
		} else if m.MessageID != "" {
			details = append(details, m.MessageID)
		}
	}
	if len(details) == 0 && e.Detail != "" {
		details = append(details, e.Detail)
	}
	if len(details) > 0 {
		b.WriteString(": ")
		b.WriteString(strings.Join(details, "; "))
	}
	return b.String()
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }

// transportError classifies an error of http.Client.Do.
func transportError(op string, err error) *Error {
	kind := bmc.ErrUnreachable
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var uaErr x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invErr x509.CertificateInvalidError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		kind = bmc.ErrTimeout
	case errors.Is(err, context.Canceled):
		kind = context.Canceled
	case errors.As(err, &certErr), errors.As(err, &uaErr), errors.As(err, &hostErr), errors.As(err, &invErr):
		kind = bmc.ErrCertificate
	}
	// Drop url.Error's "Get "https://…": " prefix: Op names the request.
	detail := err.Error()
	var urlErr interface{ Unwrap() error }
	if errors.As(err, &urlErr) && urlErr.Unwrap() != nil {
		detail = urlErr.Unwrap().Error()
	}
	if kind == bmc.ErrCertificate {
		detail += " (name the BMC's CA, or set insecure to skip verification)"
	}
	return &Error{Op: op, Kind: kind, Detail: detail}
}

// statusError classifies a non-2xx response with its body.
func statusError(op string, status int, body []byte) *Error {
	e := &Error{Op: op, StatusCode: status}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind = bmc.ErrUnauthorized
	case status == http.StatusNotFound:
		e.Kind = bmc.ErrNotFound
	case status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		e.Kind = bmc.ErrUnsupported
	case status == http.StatusGatewayTimeout || status == http.StatusRequestTimeout:
		e.Kind = bmc.ErrTimeout
	case status >= 500:
		e.Kind = bmc.ErrServer
	default:
		e.Kind = bmc.ErrRejected
	}
	var r ErrorResponse
	if json.Unmarshal(body, &r) == nil {
		e.Code = r.Error.Code
		e.Messages = r.Error.ExtendedInfo
		e.Detail = r.Error.Message
	} else if s := strings.TrimSpace(string(body)); s != "" && len(s) < 200 && !strings.ContainsAny(s, "<>") {
		e.Detail = s
	} else {
		e.Detail = http.StatusText(status)
	}
	return e
}
