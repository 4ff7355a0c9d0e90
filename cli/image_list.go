package cli

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func newImageListCommand(o *options) *cobra.Command {
	var output string
	var stale bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the ImageReleases with their channels and users",
		Long: `List the ImageReleases, newest first: VERSION, CHANNELS, KERNEL (the kernel
version in the release's components; 'image describe' shows the files), CREATED (how long ago the release was recorded) and USED BY (how many
Revisions name it: booted, staged or kept in the Servers' boot history; a
release they name cannot be deleted). -o wide adds the name, KUBELET and the key that signed
it. -o json|yaml|name print the ImageRelease objects as 'roostctl get
imagereleases' does.`,
		Example: `  roostctl image list
  roostctl image list -o wide
  roostctl image list -o name`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkGetOutput(output); err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "ImageRelease", Consistency: consistency(stale)})
			if err != nil {
				return o.wrapCallError(err)
			}
			rels := resp.GetObjects()
			sort.SliceStable(rels, func(i, j int) bool {
				return rels[i].GetImageRelease().GetMetadata().GetCreateIndex() > rels[j].GetImageRelease().GetMetadata().GetCreateIndex()
			})
			switch output {
			case outJSON, outYAML:
				data, err := encodeObjects(rels, output, true)
				if err != nil {
					return err
				}
				_, err = o.Out.Write(data)
				return err
			case outName:
				for _, r := range rels {
					fmt.Fprintln(o.Out, objectRef(r))
				}
				return nil
			}
			if len(rels) == 0 {
				fmt.Fprintln(o.Err, "No ImageRelease yet: push one with 'roostctl image push BUNDLE_DIR'.")
				return nil
			}
			u, err := o.usage(ctx, conn, rels, stale)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(o.Out, 0, 4, 3, ' ', 0)
			header := "VERSION\tCHANNELS\tKERNEL\tCREATED\tUSED BY"
			if output == outWide {
				header += "\tNAME\tKUBELET\tSIGNED BY"
			}
			fmt.Fprintln(tw, header)
			for _, ob := range rels {
				r := ob.GetImageRelease()
				ts := r.GetMetadata().GetCreationTimestamp()
				row := []string{tableCell(r.GetSpec().GetVersion()), orNone(strings.Join(r.GetSpec().GetChannels(), ",")),
					orNone(r.GetSpec().GetComponents()["kernel"]), o.age(ts.AsTime(), ts != nil), strconv.Itoa(len(u.revisionsOf(r)))}
				if output == outWide {
					row = append(row, r.GetMetadata().GetName(), orNone(r.GetSpec().GetComponents()["kubelet"]), orNone(signerOf(r)))
				}
				fmt.Fprintln(tw, strings.Join(row, "\t"))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, wide, json, yaml or name")
	cmd.Flags().BoolVar(&stale, "stale", false, "read the reached member's local state without asking the leader (may lag)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outWide, outJSON, outYAML, outName))
	return cmd
}
