package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// signerOf is the keyID the release's manifest names, or "".
func signerOf(r *roostv1.ImageRelease) string {
	var m release.Manifest
	if err := json.Unmarshal(r.GetSpec().GetManifest(), &m); err != nil {
		return ""
	}
	return m.KeyID
}

func newImageDescribeCommand(o *options) *cobra.Command {
	var stale bool
	cmd := &cobra.Command{
		Use:   "describe VERSION",
		Short: "Show one ImageRelease: artifacts, signer, channels and users",
		Long: `Show one ImageRelease for humans: version, channels, components, each
artifact's digest and size, the key that signed it (and whether the hub
trusts it), the Pools whose current target it is — pinned to it
(spec.imageVersion), following a channel whose newest release it is
(spec.imageChannel), or naming neither while it is the newest release of
all, promoted or not — and the Revisions that boot it. VERSION is the
release's version (2026.11.0) or its name (v2026-11-0). Use 'roostctl get
imagerelease NAME -o yaml' for a machine-readable form.`,
		Example:           `  roostctl image describe 2026.11.0`,
		Args:              exactArgs(1, "a VERSION"),
		ValidArgsFunction: o.argCompletions(false, releaseVersions),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			r, err := o.getRelease(ctx, conn, args[0], stale)
			if err != nil {
				return err
			}
			// Every release: which one a Pool targets depends on the others.
			rels, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "ImageRelease", Consistency: consistency(stale)})
			if err != nil {
				return o.wrapCallError(err)
			}
			u, err := o.usage(ctx, conn, rels.GetObjects(), stale)
			if err != nil {
				return err
			}
			keys, err := conn.hub.ListTrustedKeys(ctx, &roostv1.ListTrustedKeysRequest{})
			if err != nil {
				return o.wrapCallError(err)
			}
			return o.describeRelease(r, u, keys.GetKeys())
		},
	}
	cmd.Flags().BoolVar(&stale, "stale", false, "read the reached member's local state without asking the leader (may lag)")
	return cmd
}

func (o *options) describeRelease(r *roostv1.ImageRelease, u releaseUsage, keys []*roostv1.TrustedKey) error {
	tw := tabwriter.NewWriter(o.Out, 0, 4, 1, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	spec, md := r.GetSpec(), r.GetMetadata()
	kv("Name", md.GetName())
	kv("Version", tableCell(spec.GetVersion()))
	kv("Channels", orNone(strings.Join(spec.GetChannels(), ", ")))
	if ts := md.GetCreationTimestamp(); ts != nil {
		kv("Created", fmt.Sprintf("%s (%s ago)", ts.AsTime().UTC().Format(time.RFC3339), duration.HumanDuration(o.now().Sub(ts.AsTime()))))
	}
	var comps []string
	for _, k := range slices.Sorted(maps.Keys(spec.GetComponents())) {
		comps = append(comps, k+"="+spec.GetComponents()[k])
	}
	kv("Components", orNone(strings.Join(comps, ", ")))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "Artifacts:")
	tw = tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	for _, a := range []struct {
		name string
		art  *roostv1.Artifact
	}{{"kernel", spec.GetKernel()}, {"initrd", spec.GetInitrd()}, {"boot loader", spec.GetBootLoader()}} {
		if a.art == nil {
			continue
		}
		fmt.Fprintf(tw, "  %s\tsha256:%s\t%s\n", a.name, a.art.GetSha256(), formatBytes(a.art.GetSize()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	signer := signerOf(r)
	trust := "no release key is trusted: the hub did not check the signature"
	if len(keys) > 0 {
		trust = "not trusted now"
		for _, k := range keys {
			if signer != "" && strings.HasPrefix(k.GetId(), signer) {
				trust = "trusted"
				if k.GetComment() != "" {
					trust += " (" + k.GetComment() + ")"
				}
			}
		}
	}
	fmt.Fprintf(o.Out, "Signed by:  %s, %s\n", orNone(signer), trust)
	rels := u.releases
	if !slices.ContainsFunc(rels, func(x *roostv1.ImageRelease) bool { return x.GetMetadata().GetName() == md.GetName() }) {
		rels = append(slices.Clip(rels), r) // listed before it was recorded
	}
	var pools []string
	for _, p := range u.pools {
		if how := poolTarget(p, r, rels); how != "" {
			pools = append(pools, p.GetMetadata().GetName()+" ("+how+")")
		}
	}
	sort.Strings(pools)
	fmt.Fprintf(o.Out, "Pools:      %s\n", orNone(strings.Join(pools, ", ")))
	revs := u.revisionsOf(r)
	sort.Strings(revs)
	fmt.Fprintf(o.Out, "Used by:    %s\n", english.Count(len(revs), "Revision", "Revisions"))
	const maxShown = 20
	for i, name := range revs {
		if i == maxShown {
			fmt.Fprintf(o.Out, "  … and %d more\n", len(revs)-maxShown)
			break
		}
		fmt.Fprintf(o.Out, "  %s\n", name)
	}
	return nil
}
