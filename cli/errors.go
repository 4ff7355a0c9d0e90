package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
)

// usageError is bad usage or invalid input: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// reportedError is an error whose details the command already printed to
// standard error; only the exit code remains to be returned.
type reportedError struct{ code int }

func (e reportedError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func isReported(err error) bool {
	var r reportedError
	return errors.As(err, &r)
}

// cobraUsage marks errors cobra returned before a command ran (unknown
// command, flag or argument errors), after which a pointer to --help helps.
type cobraUsage struct{ err error }

func (e cobraUsage) Error() string { return e.err.Error() }
func (e cobraUsage) Unwrap() error { return e.err }

func isCobraUsage(err error) bool {
	var c cobraUsage
	return errors.As(err, &c)
}

// grpcStatus returns the gRPC status inside err, if any (including
// *apierror.Error, which carries one).
func grpcStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus(), true
	}
	return nil, false
}

// exitCodeOf maps a gRPC code to roostctl's exit code.
func exitCodeOf(c codes.Code) int {
	switch c {
	case codes.OK:
		return ExitOK
	case codes.InvalidArgument, codes.OutOfRange:
		return ExitUsage
	case codes.Unavailable, codes.DeadlineExceeded:
		return ExitUnreachable
	case codes.Aborted:
		// A conflict (apply's metadata.modifyIndex or uid precondition):
		// the hub refused the request as the state is now.
		return ExitFailed
	default:
		return ExitFailed
	}
}

// exitCode maps any error a command returned to the exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var r reportedError
	if errors.As(err, &r) {
		return r.code
	}
	var u usageError
	if errors.As(err, &u) || isCobraUsage(err) {
		return ExitUsage
	}
	if isOutcomeUnknown(err) {
		return ExitUnknown
	}
	if st, ok := grpcStatus(err); ok {
		return exitCodeOf(st.Code())
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ExitUnreachable
	case errors.Is(err, context.Canceled):
		return ExitFailed
	}
	return ExitFailed
}

// isHubError says whether err is an answer from the hub (not a local
// problem and not a transport failure).
func isHubError(err error) bool {
	st, ok := grpcStatus(err)
	if !ok || isOutcomeUnknown(err) {
		return false
	}
	switch st.Code() {
	case codes.OK, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}

// printError writes err to w: hub refusals as "Error from hub: MESSAGE" with
// one violation per line, everything else as "error: MESSAGE".
func printError(w io.Writer, err error) {
	if isOutcomeUnknown(err) {
		fmt.Fprintf(w, "error: outcome unknown: the hub may have applied it (%s)\n", oneLine(apierror.FromError(err).Message))
		return
	}
	if st, ok := grpcStatus(err); ok {
		e := apierror.FromError(st.Err())
		switch st.Code() {
		case codes.Unavailable:
			fmt.Fprintf(w, "error: hub unreachable: %s\n", oneLine(e.Message))
			printHint(w, err)
			return
		case codes.DeadlineExceeded:
			fmt.Fprintf(w, "error: hub did not answer in time: %s\n", oneLine(e.Message))
			printHint(w, err)
			return
		case codes.Canceled:
			fmt.Fprintf(w, "error: interrupted: %s\n", oneLine(e.Message))
			return
		}
		prefix := "Error from hub: "
		var ctx withContext
		if errors.As(err, &ctx) {
			prefix = "Error from hub: " + ctx.context + ": "
		}
		if len(e.Violations) == 1 && e.Violations[0].Message == e.Message {
			// One problem, told once, with its field path.
			fmt.Fprintf(w, "%s%s\n", prefix, e.Violations[0].String())
			return
		}
		fmt.Fprintf(w, "%s%s\n", prefix, e.Message)
		for _, v := range e.Violations {
			fmt.Fprintf(w, "  %s\n", v.String())
		}
		return
	}
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(w, "error: %s\n", err)
		printHint(w, err)
		return
	}
	fmt.Fprintf(w, "error: %s\n", err)
}

// withContext names what a hub error was about, e.g. `pool/workers`, when
// the hub's message alone would not say it.
type withContext struct {
	context string
	err     error
}

func (e withContext) Error() string { return e.context + ": " + e.err.Error() }
func (e withContext) Unwrap() error { return e.err }

// unreachableHint is attached to transport failures so that the user learns
// which addresses were tried.
type unreachableHint struct {
	hint string
	err  error
}

func (e unreachableHint) Error() string { return e.err.Error() }
func (e unreachableHint) Unwrap() error { return e.err }

func printHint(w io.Writer, err error) {
	var h unreachableHint
	if errors.As(err, &h) && h.hint != "" {
		fmt.Fprintf(w, "  %s\n", h.hint)
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
