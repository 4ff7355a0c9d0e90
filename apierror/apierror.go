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
}

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
func Unavailable(format string, a ...any) *Error {
	return &Error{Code: codes.Unavailable, Message: fmt.Sprintf(format, a...)}
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
	out := &Error{Code: st.Code(), Message: st.Message()}
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
