// Package apierror is the one place where Roost's errors meet gRPC status
// codes. The hub's state machine, validation and API return *Error values;
// the API server turns them into gRPC statuses with ToStatus, and clients
// turn statuses back into *Error with FromError, keeping field violations
// (google.rpc.BadRequest) intact so a CLI can point at the YAML line.
package apierror

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Violation is one problem with one field of a request.
type Violation struct {
	// Field is the field path in manifest (JSON) names, e.g.
	// "spec.rollout.maxUnavailable" or "objects[2].metadata.name".
	Field string
	// Message says what is wrong, e.g. "must be ≥ 1, got 0".
	Message string
	// Hint says how to fix it; may be empty.
	Hint string
}

func (v Violation) String() string {
	s := v.Field + ": " + v.Message
	if v.Hint != "" {
		s += " (" + v.Hint + ")"
	}
	return s
}

// Error is an API error with a gRPC code.
type Error struct {
	Code       codes.Code
	Message    string
	Violations []Violation
	// Reason is "" or one of the Reason constants: what the error says
	// about the write it answers, carried as a google.rpc.ErrorInfo
	// detail (domain Domain) so that it survives forwarding between
	// members and reaches the client.
	Reason string
}

// Domain is the google.rpc.ErrorInfo domain of Roost's reasons.
const Domain = "roost.dev"

// Reasons an error gives about the outcome of a write.
const (
	// ReasonNotApplied: the request was refused before anything was
	// proposed to Raft (no leader yet, not the leader, a leadership
	// transfer, a member stopping): nothing was applied and it is safe
	// to send the request again.
	ReasonNotApplied = "NOT_APPLIED"
	// ReasonOutcomeUnknown: the write was proposed and the hub cannot
	// tell whether it was applied (leadership lost before it committed,
	// the member stopped, the call's deadline passed while it
	// committed). Read the state, or send the request again with the
	// same request ID, which the hub applies at most once.
	ReasonOutcomeUnknown = "OUTCOME_UNKNOWN"
)

func (e *Error) Error() string {
	if len(e.Violations) == 0 {
		return e.Message
	}
	var b strings.Builder
	b.WriteString(e.Message)
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// GRPCStatus lets grpc-go turn an *Error returned by a handler into a status.
func (e *Error) GRPCStatus() *status.Status { return ToStatus(e) }

// NotFound reports a missing object.
func NotFound(kind, name string) *Error {
	return &Error{Code: codes.NotFound, Message: fmt.Sprintf("%s %q not found", kind, name)}
}

// Invalid reports field violations; message summarises them.
func Invalid(message string, v ...Violation) *Error {
	return &Error{Code: codes.InvalidArgument, Message: message, Violations: v}
}

// FailedPrecondition reports a request the current state does not allow
// (dangling references, objects still in use, expired tokens).
func FailedPrecondition(format string, a ...any) *Error {
	return &Error{Code: codes.FailedPrecondition, Message: fmt.Sprintf(format, a...)}
}

// FailedPreconditionFields is FailedPrecondition with field violations.
func FailedPreconditionFields(message string, v ...Violation) *Error {
	return &Error{Code: codes.FailedPrecondition, Message: message, Violations: v}
}

// Aborted reports a write whose precondition failed because the state
// changed concurrently, e.g. an apply whose metadata.modifyIndex or
// metadata.uid no longer matches the stored object (Kubernetes' 409
// Conflict). Read the object again and retry the read-modify-write.
func Aborted(message string, v ...Violation) *Error {
	return &Error{Code: codes.Aborted, Message: message, Violations: v}
}

// AlreadyExists reports a create of an existing object.
func AlreadyExists(kind, name string) *Error {
	return &Error{Code: codes.AlreadyExists, Message: fmt.Sprintf("%s %q already exists", kind, name)}
}

// PermissionDenied reports a caller without the needed role.
func PermissionDenied(format string, a ...any) *Error {
	return &Error{Code: codes.PermissionDenied, Message: fmt.Sprintf(format, a...)}
}

// Unavailable reports a transient condition (no leader, shutting down).
// It says nothing about whether a write was applied; see NotApplied.
func Unavailable(format string, a ...any) *Error {
	return &Error{Code: codes.Unavailable, Message: fmt.Sprintf(format, a...)}
}

// NotApplied reports a transient condition met before the request was
// proposed (no leader, not the leader, stopping): Unavailable with
// ReasonNotApplied, which clients retry, on another member if need be.
func NotApplied(format string, a ...any) *Error {
	return &Error{Code: codes.Unavailable, Message: fmt.Sprintf(format, a...), Reason: ReasonNotApplied}
}

// OutcomeUnknown reports a write that was proposed and may or may not
// have been applied: code Unknown with ReasonOutcomeUnknown.
func OutcomeUnknown(format string, a ...any) *Error {
	return &Error{Code: codes.Unknown, Message: fmt.Sprintf(format, a...), Reason: ReasonOutcomeUnknown}
}

// ReasonOf returns the reason err carries (an *Error's Reason, or the
// google.rpc.ErrorInfo of domain Domain in a gRPC status), "" for none.
func ReasonOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return ""
	}
	return reasonOfStatus(se.GRPCStatus())
}

func reasonOfStatus(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info.GetReason()
		}
	}
	return ""
}

// ToStatus converts any error to a gRPC status: *Error keeps its code and
// violations (as google.rpc.BadRequest details); context errors map to
// Canceled/DeadlineExceeded; an existing status passes through; anything
// else is Internal.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		st := status.New(e.Code, e.Message)
		if len(e.Violations) > 0 {
			br := &errdetails.BadRequest{}
			for _, v := range e.Violations {
				br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
					Field: v.Field, Description: v.Message, Reason: v.Hint,
				})
			}
			if withDetails, derr := st.WithDetails(br); derr == nil {
				st = withDetails
			}
		}
		if e.Reason != "" {
			if withDetails, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: e.Reason, Domain: Domain}); derr == nil {
				st = withDetails
			}
		}
		return st
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, err.Error())
	}
	return status.New(codes.Internal, err.Error())
}

// FromError converts an error returned by a gRPC call back into an *Error,
// with the field violations of any google.rpc.BadRequest detail.
func FromError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	st, _ := status.FromError(err)
	out := &Error{Code: st.Code(), Message: st.Message(), Reason: reasonOfStatus(st)}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				out.Violations = append(out.Violations, Violation{Field: fv.GetField(), Message: fv.GetDescription(), Hint: fv.GetReason()})
			}
		}
	}
	return out
}

// Code returns the gRPC code of err (OK for nil, Unknown for plain errors).
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	return ToStatus(err).Code()
}
