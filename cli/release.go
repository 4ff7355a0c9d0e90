package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// releaseTimeout is how long a command that releases Machines waits for
// the hub unless --timeout is given: the hub drains worker Nodes first,
// each for at most its Cluster's drainTimeout (at most 1h), all at once.
const releaseTimeout = time.Hour + 5*time.Minute

// releaseNoteAfter is how long a release call runs before roostctl says
// on stderr what it waits for.
const releaseNoteAfter = 3 * time.Second

// forceFlagHelp is the help of --force on the commands that release
// Machines.
const forceFlagHelp = "release worker Machines at once, without cordoning and draining their Nodes\n(their pods stop with the host)"

// openRelease opens a connection for a command that releases Machines:
// unless --timeout was given it allows releaseTimeout, and while the call
// is slow it says once, on stderr, that the hub drains Nodes first. Call
// done when finished.
func (o *options) openRelease(cmd *cobra.Command, force bool) (ctx context.Context, conn *hubConn, done func(), err error) {
	timeout := o.timeout
	if f := cmd.Flags().Lookup("timeout"); f == nil || !f.Changed {
		timeout = max(releaseTimeout, o.timeout)
	}
	ctx, conn, closeConn, err := o.openWithin(cmd.Context(), timeout)
	if err != nil {
		return nil, nil, nil, err
	}
	var note *time.Timer
	if !force {
		note = time.AfterFunc(releaseNoteAfter, func() {
			fmt.Fprintln(o.Err, "waiting for the hub to cordon and drain the Nodes of worker Machines before releasing them "+
				"(at most the Cluster's drainTimeout; Ctrl-C gives up and releases nothing, --force skips the drain)")
		})
	}
	return ctx, conn, func() {
		if note != nil {
			note.Stop()
		}
		closeConn()
	}, nil
}
