package cli

import (
	"fmt"

	"github.com/roostfleet/roost/cli/printers"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const describeExample = `  # Everything about one pool: spec, status, conditions
  roostctl describe pool workers

  # A server, by its short kind name
  roostctl describe srv 4c4c4544-0042-3510-8052-b4c04f4d4e31

  # A release feed: each release tried, Imported or ImportFailed with the reason
  roostctl describe feed upstream`

type describeOptions struct {
	stale bool
}

func newDescribeCommand(o *options) *cobra.Command {
	d := &describeOptions{}
	cmd := &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show one object in detail, for humans",
		Long: `Show one object in detail: metadata, every spec field, status and
conditions, with ages relative to now. The layout is for reading; use
'roostctl get KIND NAME -o yaml' for a stable, machine-readable form.

KIND is a kind name in any form (singular, plural, short name; see
'roostctl get --help'). A NAME that does not exist fails with exit code 1.
The output ends with the object's last 10 Events (what the hub did to it
and why; all of them: 'roostctl get events --for KIND/NAME').`,
		Example:           describeExample,
		Args:              exactArgs(2, "KIND and NAME"),
		ValidArgsFunction: o.kindAndNameCompletions(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := lookupKind(args[0])
			if err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: k.Name, Name: args[1], Consistency: consistency(d.stale)})
			if err != nil {
				return o.wrapCallError(err)
			}
			if err := printers.Describe(o.Out, resp.GetObject(), o.now()); err != nil || k.Name == "Event" {
				return err
			}
			// The object's last Events, as kubectl describe ends.
			evs, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "Event", Consistency: consistency(d.stale),
				InvolvedObject: &roostv1.EventObject{Kind: k.Name, Name: args[1]}})
			if err != nil {
				fmt.Fprintf(o.Out, "Events:\t<unavailable: %s>\n", oneLine(status.Convert(err).Message()))
				return nil
			}
			return printers.DescribeEvents(o.Out, evs.GetObjects(), o.now())
		},
	}
	cmd.Flags().BoolVar(&d.stale, "stale", false, "read the reached member's local state without asking the leader (may lag)")
	return cmd
}
