package cli

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
)

// requestIDRE is what --request-id accepts: at most 100 characters, so
// that the per-call suffix ("-1", "-2", …) keeps IDs within the hub's
// 128 bytes, and nothing a gRPC metadata value or a shell would mangle.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,100}$`)

// startRequestIDs sets the base of the command's request IDs: --request-id,
// else a fresh random one. Each write call gets BASE-1, BASE-2, … in the
// order the command makes them (client.RequestIDs), so the same command
// run again with the same --request-id sends the same IDs.
func (o *options) startRequestIDs() error {
	if o.requestID != "" && !requestIDRE.MatchString(o.requestID) {
		return usageErrorf("--request-id %q: use 1 to 100 letters, digits, '.', '_', ':' or '-'", o.requestID)
	}
	if o.requestIDs == nil {
		o.requestIDs = &client.RequestIDs{}
	}
	o.requestIDs.Base = o.requestID
	if o.requestIDs.Base == "" {
		o.requestIDs.Base = client.NewRequestID()
	}
	return nil
}

// isOutcomeUnknown says whether err is a write whose outcome is unknown:
// the client gave up on it (*client.OutcomeUnknownError), or the hub said
// so (apierror.ReasonOutcomeUnknown).
func isOutcomeUnknown(err error) bool {
	var u *client.OutcomeUnknownError
	return errors.As(err, &u) || apierror.ReasonOf(err) == apierror.ReasonOutcomeUnknown
}

// printOutcomeUnknown tells that the write of cmd may have been applied,
// how to check, and how to retry it safely.
func (o *options) printOutcomeUnknown(err error, cmd *cobra.Command) {
	msg := err.Error()
	if st, ok := grpcStatus(err); ok {
		msg = st.Message()
	}
	var u *client.OutcomeUnknownError
	if errors.As(err, &u) && u.Err != nil {
		msg = status.Convert(u.Err).Message()
	}
	fmt.Fprintf(o.Err, "error: outcome unknown: the hub may have applied it (%s)\n", oneLine(msg))
	path := "roostctl"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	fmt.Fprintf(o.Err, "  check with '%s'", checkCommand(path))
	if strings.HasPrefix(path, "roostctl hub snapshot restore") {
		fmt.Fprintln(o.Err, ", or restore the same file again (harmless)")
		return
	}
	if o.requestIDs != nil && o.requestIDs.Base != "" {
		fmt.Fprintf(o.Err, ", or run the same command again with --request-id %s within an hour: the hub applies it at most once", o.requestIDs.Base)
	}
	fmt.Fprintln(o.Err)
}

// checks are the commands that show whether a write of the command path
// they follow was applied; the first whose prefix matches is taken.
var checks = []struct{ prefix, check string }{
	{"roostctl token", "roostctl token list"},
	{"roostctl hub join", "roostctl hub join-tokens list"},
	{"roostctl hub join-tokens", "roostctl hub join-tokens list"},
	{"roostctl hub snapshot", "roostctl get KIND NAME"},
	{"roostctl hub", "roostctl hub members"},
	{"roostctl machine", "roostctl get machines"},
	{"roostctl pool", "roostctl get machines"},
	{"roostctl server", "roostctl get servers"},
	{"roostctl cluster", "roostctl get clusters"},
	{"roostctl rollout", "roostctl rollout status"},
	{"roostctl image trust", "roostctl image trust list"},
	{"roostctl image", "roostctl image list"},
	{"roostctl extension", "roostctl get extensions"},
	{"roostctl apply", "roostctl get KIND NAME"},
	{"roostctl delete", "roostctl get KIND NAME"},
}

// checkCommand returns the command that shows whether a write of the
// command at path was applied.
func checkCommand(path string) string {
	for _, c := range checks {
		if path == c.prefix || strings.HasPrefix(path, c.prefix+" ") {
			return c.check
		}
	}
	return "roostctl get KIND NAME"
}
