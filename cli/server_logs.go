package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// logsTimeout bounds a server logs call without --follow (unless --timeout
// is given): reading a large journal over a slow link takes a while.
const logsTimeout = 10 * time.Minute

// Output formats of server logs.
const (
	logsText = "text"
	logsJSON = "json"
)

func newServerLogsCommand(o *options) *cobra.Command {
	var (
		follow bool
		units  []string
		since  string
		boot   int32
		lines  int32
		output string
	)
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Show a server's systemd journal",
		Long: `Show the systemd journal of a server, read by its agent with journalctl and
sent through the agent's own connection to the hub (so it works for servers
behind NAT, and while a server enrolls: the enrollment image's agent is
connected from the moment it enrolled). Any hub member serves the call: it
asks the member the agent is connected to.

Without --boot the current boot is shown. --boot -1 shows the boot before
it: installed servers keep their journal on the install disk's STATE
partition (/var/log/journal, at most 256 MiB), so the boot of a Revision
that failed can be read after the server fell back to the previous one.
The enrollment image keeps its journal in memory only.

The output is journalctl's short-iso text (-o json: one JSON object per
entry and line, as journalctl -o json). At most 64 MiB are sent; a warning
says when the output was cut. --follow keeps streaming new entries until
Ctrl-C, which stops journalctl on the server.

Logs may hold secrets (a unit printing its environment or a token), so
reading them takes the operator or admin role, and each read is recorded in
the audit log of the member that served it.`,
		Example: `  roostctl server logs 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl server logs 4c4c4544-0042-3510-8052-b4c04f4d4e31 -f -u roost-agent
  roostctl server logs 4c4c4544-0042-3510-8052-b4c04f4d4e31 --boot -1 -u kubelet     # the boot before this one
  roostctl server logs 4c4c4544-0042-3510-8052-b4c04f4d4e31 --since 30m -n 200
  roostctl server logs 4c4c4544-0042-3510-8052-b4c04f4d4e31 --since "2026-12-01 08:00" -o json`,
		Args:              exactArgs(1, "a server NAME"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Server")),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &roostv1.ReadServerLogsRequest{Server: args[0], Units: units, Boot: boot, Lines: lines, Follow: follow}
			switch output {
			case logsText:
			case logsJSON:
				req.Json = true
			default:
				return usageErrorf("--output %q: want text or json", output)
			}
			if boot > 0 {
				return usageErrorf("--boot %d: boots count back from this one: 0 is this boot, -1 the one before", boot)
			}
			if follow && boot != 0 {
				return usageErrorf("--follow reads the current boot: leave out --boot or --follow")
			}
			if lines < 0 {
				return usageErrorf("--lines %d: give a positive number of entries, or 0 for all", lines)
			}
			if since != "" {
				ago, at, err := parseSince(since, time.Now())
				if err != nil {
					return usageErrorf("--since %q: %v", since, err)
				}
				if ago > 0 {
					req.SinceAgo = durationpb.New(ago)
				} else {
					req.Since = timestamppb.New(at)
				}
			}
			ctx := cmd.Context()
			var conn *hubConn
			var err error
			if follow {
				// as long as the journal is followed (until Ctrl-C); only
				// connecting is bounded by --timeout
				dialCtx, cancel := o.withTimeout(ctx)
				conn, err = o.connect(dialCtx)
				cancel()
				if err != nil {
					return err
				}
				defer conn.Close()
			} else {
				var done func()
				ctx, conn, done, err = o.openWithin(ctx, o.callTimeout(cmd, logsTimeout))
				if err != nil {
					return err
				}
				defer done()
			}
			stream, err := conn.hub.ReadServerLogs(ctx, req)
			if err != nil {
				return o.wrapCallError(err)
			}
			truncated, err := copyServerData(o.Out, stream)
			if err != nil {
				if follow && cmd.Context().Err() != nil {
					return nil // Ctrl-C ends following
				}
				return o.wrapCallError(err)
			}
			if truncated {
				fmt.Fprintln(o.Err, "Warning: the output was cut at 64 MiB (the hub's bound): narrow it with --since, --lines or --unit")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep streaming new entries until Ctrl-C")
	f.StringArrayVarP(&units, "unit", "u", nil, "show only this systemd `UNIT`'s entries, e.g. kubelet (repeat for more)")
	f.StringVar(&since, "since", "", "show entries from `WHEN` on: a duration back from now (30m, 2h) or a time\n(2026-12-01 08:00, RFC 3339), on the server's clock")
	f.Int32Var(&boot, "boot", 0, "the boot to show: 0 this one, -1 the one before, and so on (`N`)")
	f.Int32VarP(&lines, "lines", "n", 0, "show only the last `N` entries (0: all)")
	f.StringVarP(&output, "output", "o", logsText, "output `FORMAT`: text (journalctl's short-iso) or json (one object per line)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(logsText, logsJSON))
	_ = cmd.RegisterFlagCompletionFunc("unit", fixedCompletions("kubelet", "containerd", "roost-agent", "systemd-networkd", "ignition-files"))
	_ = cmd.RegisterFlagCompletionFunc("boot", fixedCompletions("0", "-1", "-2"))
	return cmd
}

// parseSince reads --since: a Go duration back from now (ago > 0), or a
// time as RFC 3339, "2006-01-02 15:04[:05]" or "2006-01-02" in the local
// time zone (at).
func parseSince(s string, now time.Time) (ago time.Duration, at time.Time, err error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return 0, time.Time{}, errors.New("give a positive duration, e.g. 30m")
		}
		return d, time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return 0, t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return 0, t, nil
		}
	}
	return 0, time.Time{}, errors.New("want a duration (30m, 2h) or a time (2026-12-01 08:00, or RFC 3339)")
}

// copyServerData writes the data of a ReadServerLogs or
// CollectServerBundle stream to w until it ends; truncated says the hub
// cut it at its bound.
func copyServerData(w io.Writer, stream interface {
	Recv() (*roostv1.ServerDataChunk, error)
}) (truncated bool, err error) {
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return truncated, nil
		}
		if err != nil {
			return truncated, err
		}
		if _, err := w.Write(c.GetData()); err != nil {
			return truncated, fmt.Errorf("writing the output: %w", err)
		}
		truncated = truncated || c.GetTruncated()
	}
}

// cleanServerName is a server name fit for a file name.
func cleanServerName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, name)
}
