package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

const windowNextExample = `  # The next five openings of the window "tuesday-night"
  roostctl window next tuesday-night

  # When may the pool "workers" reboot? All of its windows, merged
  roostctl window next --pool workers -n 10

  # Does the window open across the DST change of March 2027? Start from a date
  roostctl window next nightly --from 2027-03-27T00:00:00+01:00 -n 3

  # Try a window before applying it, from its manifest
  roostctl window next nightly -f window.yaml

  # For scripts: start and end in local time and UTC, with the zone
  roostctl window next --pool workers -o json`

func newWindowCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "window",
		Aliases: []string{"windows", "mw"},
		Short:   "Show when maintenance windows open",
		Long: `A MaintenanceWindow is a recurring period in which disruptive work (image
upgrades, reboots) may start: an RFC 5545 recurrence rule, a duration of at
most 24h and an IANA time zone. A Pool lists its windows in
spec.maintenanceWindows; a pool without windows may reboot at any time.

The rule runs on the wall clock of the window's zone. On the night clocks
spring forward, a start time they skip (02:30 in Europe/Berlin) opens at the
first instant after the jump (03:00); on the night they fall back, a start
time they show twice opens once, the first time. Durations are elapsed time,
and an opening that crosses midnight belongs to the day it starts.
'roostctl window next' shows exactly what the hub computes.`,
		Example: windowNextExample,
		GroupID: "fleet",
		Args:    unknownSubcommand,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newWindowNextCommand(o))
	return cmd
}

type windowNextOptions struct {
	pool   string
	n      int
	from   string
	output string
	files  []string
	stale  bool
}

func newWindowNextCommand(o *options) *cobra.Command {
	p := &windowNextOptions{}
	cmd := &cobra.Command{
		Use:   "next WINDOW | --pool POOL",
		Short: "List the next openings of a window, or of all windows of a pool",
		Long: `List the next openings of the MaintenanceWindow WINDOW, or with --pool those
of every window the Pool lists, merged: openings of different windows that
overlap or touch are shown as one, with every window's name.

An opening that started before --from (default: now) and is still open is
listed first. Each row shows the start and end in the window's time zone
(with its abbreviation, so DST shows) and in UTC:

  START                      END                        START (UTC)        END (UTC)          WINDOW
  Tue 2026-12-01 02:00 CET   Tue 2026-12-01 06:00 CET   2026-12-01 01:00   2026-12-01 05:00   tuesday-night

Fewer than -n rows come back when the rule ends (UNTIL or COUNT). With -f,
the windows (and the pool) are read from manifests, checked as 'roostctl
apply' would, instead of the hub: try a window before applying it.

-o json and -o yaml print a list of {window, start, end, startUTC, endUTC,
timeZone}, times in RFC 3339.`,
		Example: windowNextExample,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return fmt.Errorf("takes one WINDOW, got %d arguments", len(args))
			case len(args) == 1 && p.pool != "":
				return fmt.Errorf("give a WINDOW or --pool, not both")
			case len(args) == 0 && p.pool == "":
				return fmt.Errorf("name a WINDOW, or a pool with --pool")
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if p.pool != "" {
				return nil, cobra.ShellCompDirectiveNoFileComp // --pool takes no WINDOW
			}
			return o.argCompletions(false, objectNames("MaintenanceWindow"))(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.runWindowNext(cmd.Context(), p, name)
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.pool, "pool", "", "list the merged openings of every window of the Pool `POOL`")
	f.IntVarP(&p.n, "number", "n", 5, "how many openings to list (1 to 1000)")
	f.StringVar(&p.from, "from", "", "list openings open at or after `TIME`, RFC 3339 (e.g. 2026-12-01T00:00:00Z);\ndefault now")
	f.StringVarP(&p.output, "output", "o", outTable, "output `FORMAT`: table, json or yaml")
	f.StringSliceVarP(&p.files, "filename", "f", nil, "read the windows (and the pool) from manifest `FILES` (a file, a directory,\nor - for standard input) instead of the hub")
	f.BoolVar(&p.stale, "stale", false, "read the reached member's local state without asking the leader (may lag)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outJSON, outYAML))
	_ = cmd.RegisterFlagCompletionFunc("pool", o.flagCompletions(objectNames("Pool")))
	return cmd
}

// windowSource finds Pools and MaintenanceWindows by name; ok is false when
// there is none of that name.
type windowSource func(ctx context.Context, kind, name string) (obj *roostv1.Object, ok bool, err error)

func (o *options) runWindowNext(ctx context.Context, p *windowNextOptions, name string) error {
	switch p.output {
	case outTable, outJSON, outYAML:
	default:
		return usageErrorf("--output %q: use table, json or yaml", p.output)
	}
	if p.n < 1 || p.n > 1000 {
		return usageErrorf("-n must be from 1 to 1000, got %d", p.n)
	}
	from := o.now()
	if p.from != "" {
		t, err := time.Parse(time.RFC3339, p.from)
		if err != nil {
			return usageErrorf("--from %q is not an RFC 3339 time such as 2026-12-01T00:00:00Z or 2026-12-01T02:00:00+01:00", p.from)
		}
		from = t
	}
	var get windowSource
	if len(p.files) > 0 {
		objs, err := o.objectsFromFiles(p.files)
		if err != nil {
			return err
		}
		get = func(_ context.Context, kind, name string) (*roostv1.Object, bool, error) {
			for _, obj := range objs {
				if _, k := resource.Unwrap(obj); k != nil && k.Name == kind && resource.NameOf(obj) == name {
					return obj, true, nil
				}
			}
			return nil, false, nil
		}
	} else {
		cctx, conn, done, err := o.open(ctx)
		if err != nil {
			return err
		}
		defer done()
		ctx = cctx
		get = func(ctx context.Context, kind, name string) (*roostv1.Object, bool, error) {
			resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: kind, Name: name, Consistency: consistency(p.stale)})
			if statusCode(err) == codes.NotFound {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, o.wrapCallError(err)
			}
			return resp.GetObject(), true, nil
		}
	}
	where, failed := "in the hub", o.windowFailed
	if len(p.files) > 0 {
		// What the manifests lack is a problem of the input: exit code 2.
		where, failed = "in "+manifestSources(p.files), o.windowInputFailed
	}

	names := []string{name}
	if p.pool != "" {
		obj, ok, err := get(ctx, "Pool", p.pool)
		if err != nil {
			return err
		}
		if !ok {
			return failed("no Pool %q %s", p.pool, where)
		}
		names = obj.GetPool().GetSpec().GetMaintenanceWindows()
		if len(names) == 0 {
			msg := fmt.Sprintf("pool %s has no maintenance windows: reboots may start at any time", p.pool)
			if p.output == outTable {
				fmt.Fprintln(o.Out, msg)
				return nil
			}
			fmt.Fprintln(o.Err, msg)
			return writeStructured(o.Out, []windowOpeningJSON{}, p.output)
		}
	}
	var ws []*window.Window
	for _, n := range names {
		obj, ok, err := get(ctx, "MaintenanceWindow", n)
		if err != nil {
			return err
		}
		switch {
		case !ok && p.pool != "":
			return failed("pool %s lists the MaintenanceWindow %q, which does not exist %s", p.pool, n, where)
		case !ok:
			return failed("no MaintenanceWindow %q %s", n, where)
		}
		w, err := window.Parse(obj.GetMaintenanceWindow().GetSpec())
		if err != nil {
			return failed("MaintenanceWindow %q %s is invalid: %v", n, where, err)
		}
		w.Name = n
		ws = append(ws, w)
	}
	var openings []window.Opening
	if p.pool != "" {
		openings = window.NextAny(ws, from, p.n)
	} else {
		openings = ws[0].Next(from, p.n)
	}
	if len(openings) < p.n {
		what := "window " + name + " has"
		if p.pool != "" {
			what = "the windows of pool " + p.pool + " have"
		}
		after := from.UTC().Format(time.RFC3339)
		if len(openings) == 0 {
			msg := fmt.Sprintf("%s no opening after %s: the rules end (UNTIL or COUNT has passed)", what, after)
			if p.output == outTable {
				fmt.Fprintln(o.Out, msg)
				return nil
			}
			fmt.Fprintln(o.Err, "note: "+msg)
		} else {
			fmt.Fprintf(o.Err, "note: %s only %d more opening(s) after %s: the rules end (UNTIL or COUNT)\n", what, len(openings), after)
		}
	}
	if p.output != outTable {
		return writeStructured(o.Out, openingsJSON(openings), p.output)
	}
	return printOpenings(o.Out, openings)
}

// windowFailed prints an error about a missing or broken window or pool and
// returns exit code 1.
func (o *options) windowFailed(format string, a ...any) error {
	fmt.Fprintf(o.Err, "error: "+format+"\n", a...)
	return reportedError{ExitFailed}
}

// windowInputFailed is windowFailed for windows and pools read from
// manifests (-f): invalid input, exit code 2.
func (o *options) windowInputFailed(format string, a ...any) error {
	return usageErrorf(format, a...)
}

// objectsFromFiles reads, decodes and validates manifests as apply does.
func (o *options) objectsFromFiles(files []string) ([]*roostv1.Object, error) {
	inputs, err := o.readInputs(files)
	if err != nil {
		return nil, err
	}
	ms, diags := decodeInputs(inputs, resource.ForApply())
	diags = append(diags, resource.ValidateManifests(ms)...)
	if len(diags) > 0 {
		sortDiagnostics(inputs, diags)
		o.printDiagnostics("invalid manifests ("+problems(len(diags))+")", diags)
		return nil, reportedError{ExitUsage}
	}
	return objectsOf(ms), nil
}

// windowOpeningJSON is the -o json|yaml form of one opening.
type windowOpeningJSON struct {
	// Window names the window, or the windows (comma-separated) of a
	// merged opening.
	Window   string `json:"window" yaml:"window"`
	Start    string `json:"start" yaml:"start"`
	End      string `json:"end" yaml:"end"`
	StartUTC string `json:"startUTC" yaml:"startUTC"`
	EndUTC   string `json:"endUTC" yaml:"endUTC"`
	TimeZone string `json:"timeZone" yaml:"timeZone"`
}

func openingsJSON(openings []window.Opening) []windowOpeningJSON {
	out := []windowOpeningJSON{}
	for _, op := range openings {
		out = append(out, windowOpeningJSON{
			Window:   strings.Join(op.Windows, ","),
			Start:    op.Start.Format(time.RFC3339),
			End:      op.End.Format(time.RFC3339),
			StartUTC: op.Start.UTC().Format(time.RFC3339),
			EndUTC:   op.End.UTC().Format(time.RFC3339),
			TimeZone: op.Start.Location().String(),
		})
	}
	return out
}

// printOpenings writes the table of openings; times show seconds only when
// some opening needs them.
func printOpenings(w io.Writer, openings []window.Opening) error {
	clock := "15:04"
	for _, op := range openings {
		if op.Start.Second() != 0 || op.End.Second() != 0 {
			clock = "15:04:05"
		}
	}
	local := "Mon 2006-01-02 " + clock + " MST"
	utc := "2006-01-02 " + clock
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "START\tEND\tSTART (UTC)\tEND (UTC)\tWINDOW")
	for _, op := range openings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", op.Start.Format(local), op.End.Format(local),
			op.Start.UTC().Format(utc), op.End.UTC().Format(utc), dash(strings.Join(op.Windows, ",")))
	}
	return tw.Flush()
}
