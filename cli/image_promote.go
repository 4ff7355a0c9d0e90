package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func newImagePromoteCommand(o *options) *cobra.Command {
	var channel, output string
	var remove bool
	cmd := &cobra.Command{
		Use:   "promote VERSION --channel CHANNEL",
		Short: "Put a release on a channel (or take it off with --remove)",
		Long: `Add CHANNEL to the channels of the release of VERSION, or remove it with
--remove. Pools that follow a channel (spec.imageChannel) move to the newest
release on it (the one recorded last), inside their maintenance windows;
taking the newest release off a channel sends them back to the one before.
Nothing else of a release ever changes. Promoting twice, or removing a
channel the release is not on, changes nothing and succeeds.

CHANNEL is a DNS label, e.g. stable or beta.`,
		Example: `  roostctl image promote 2026.11.0 --channel beta
  roostctl image promote 2026.11.0 --channel stable
  roostctl image promote 2026.11.0 --channel beta --remove`,
		Args:              exactArgs(1, "a VERSION"),
		ValidArgsFunction: o.argCompletions(false, releaseVersions),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCreateOutput(output); err != nil {
				return err
			}
			if msgs := validation.IsDNS1123Label(channel); channel == "" || len(msgs) > 0 {
				if channel == "" {
					msgs = []string{"is required"}
				}
				return usageErrorf("--channel %q: %s (use a DNS label such as stable)", channel, strings.Join(msgs, "; "))
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			version := args[0]
			if r, err := o.getRelease(ctx, conn, version, false); err == nil {
				version = r.GetSpec().GetVersion() // a name was given
			}
			resp, err := conn.hub.PromoteImageRelease(ctx, &roostv1.PromoteImageReleaseRequest{Version: version, Channel: channel, Remove: remove})
			if err != nil {
				return o.wrapCallError(err)
			}
			obj := &roostv1.Object{Kind: &roostv1.Object_ImageRelease{ImageRelease: resp.GetRelease()}}
			switch output {
			case outJSON, outYAML:
				data, err := encodeObjects([]*roostv1.Object{obj}, output, false)
				if err != nil {
					return err
				}
				_, err = o.Out.Write(data)
				return err
			case outName:
				fmt.Fprintln(o.Out, objectRef(obj))
				return nil
			}
			what := "promoted to " + channel
			switch {
			case remove && resp.GetUnchanged():
				what = "was not in " + channel
			case remove:
				what = "removed from " + channel
			case resp.GetUnchanged():
				what = "was already in " + channel
			}
			fmt.Fprintf(o.Out, "%s %s (channels: %s)\n", objectRef(obj), what, orNone(strings.Join(resp.GetRelease().GetSpec().GetChannels(), ",")))
			return nil
		},
	}
	cmd.Flags().StringVar(&channel, "channel", "", "the `CHANNEL` (e.g. stable, beta)")
	cmd.Flags().BoolVar(&remove, "remove", false, "take the release off the channel instead")
	addObjectOutputFlag(cmd, &output, "output `FORMAT` of the ImageRelease as it is now: json, yaml or name\n(default: a line saying what changed)")
	_ = cmd.RegisterFlagCompletionFunc("channel", fixedCompletions("stable", "beta"))
	return cmd
}
