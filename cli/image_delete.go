package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func newImageDeleteCommand(o *options) *cobra.Command {
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete VERSION...",
		Short: "Delete ImageReleases no Revision uses",
		Long: `Delete the ImageReleases of the given versions (or names). The hub refuses
(exit code 1) while a Revision boots the release or a Pool pins its version,
naming a few of them: move the Pools to another release first; Revisions
stay as the Servers' boot history until newer ones replace them. The
artifacts stay in the members' stores.`,
		Example:           `  roostctl image delete 2026.9.0 2026.10.0`,
		Args:              minArgs(1, "a VERSION"),
		ValidArgsFunction: o.argCompletions(true, releaseVersions),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var failed error
			for _, arg := range args {
				name := imageReleaseName(arg)
				if r, err := o.getRelease(ctx, conn, arg, false); err == nil {
					name = r.GetMetadata().GetName()
				}
				if _, err := conn.hub.Delete(ctx, &roostv1.DeleteRequest{Kind: "ImageRelease", Name: name}); err != nil {
					err = o.wrapCallError(releaseNotFound(err, arg))
					if ignoreNotFound && statusCode(err) == codes.NotFound {
						continue
					}
					if !isHubError(err) {
						return err
					}
					printError(o.Err, err)
					if failed == nil {
						failed = reportedError{exitCode(err)}
					}
					continue
				}
				fmt.Fprintf(o.Out, "imagerelease/%s deleted\n", name)
			}
			return failed
		},
	}
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "treat releases that do not exist as deleted (exit code 0)")
	return cmd
}
