package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// The image catalog verbs: trusted release keys, list, describe, promote
// and delete.

// ---- image trust

func newImageTrustCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "Manage the release keys whose signatures the hub accepts",
		Long: `Release bundles are signed with an ed25519 key ('roost-image keygen',
'roost-image release --key'). Once at least one release key is trusted, the
hub records only releases that a trusted key signed ('roostctl image push'
fails otherwise, naming the key that signed the release). While no key is
trusted, the hub records releases without checking their signatures and
warns on every push; agents check the signature with their own keys in any
case (roost-image enroll --release-key).

A key is named by its ID: the hex sha256 of the raw public key. The keyID in
a release.json is its first 16 hex digits.`,
		Example: `  roostctl image trust add release.pub --comment "release team, 2026"
  roostctl image trust list
  roostctl image trust remove 3f2a9c01`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImageTrustAddCommand(o), newImageTrustListCommand(o), newImageTrustRemoveCommand(o))
	return cmd
}

// trustedKeyJSON is the -o json|yaml form of a trusted key.
type trustedKeyJSON struct {
	ID           string `json:"id" yaml:"id"`
	Comment      string `json:"comment,omitempty" yaml:"comment,omitempty"`
	AddedAt      string `json:"addedAt,omitempty" yaml:"addedAt,omitempty"`
	PublicKeyPEM string `json:"publicKeyPem" yaml:"publicKeyPem"`
}

func keyJSON(k *roostv1.TrustedKey) trustedKeyJSON {
	j := trustedKeyJSON{ID: k.GetId(), Comment: k.GetComment(), PublicKeyPEM: k.GetPublicKeyPem()}
	if k.GetAddedAt() != nil {
		j.AddedAt = k.GetAddedAt().AsTime().UTC().Format(time.RFC3339)
	}
	return j
}

func shortKeyID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

func newImageTrustAddCommand(o *options) *cobra.Command {
	var comment, output string
	cmd := &cobra.Command{
		Use:   "add KEY_FILE",
		Short: "Trust a release key (its PEM public key file)",
		Long: `Trust the ed25519 public key in KEY_FILE (PKIX PEM, the .pub file that
'roost-image keygen' writes; - reads standard input). Its ID is printed.
Trusting a key that is already trusted succeeds and changes nothing but the
comment (when --comment is given).`,
		Example: `  roostctl image trust add ~/.roost/release.pub --comment "release team"
  roostctl image trust add release.pub -o json`,
		Args: exactArgs(1, "a KEY_FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for text)", output)
			}
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(io.LimitReader(o.In, 1<<20))
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return usageError{err}
			}
			// Check locally: a mistake (a private key!) never leaves the machine.
			if _, err := releasesig.ParsePublicKeyPEM(data); err != nil {
				return usageErrorf("%s: %w", args[0], err)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{PublicKeyPem: string(data), Comment: comment})
			if err != nil {
				return o.wrapCallError(err)
			}
			k := resp.GetKey()
			if output != "" {
				return writeStructured(o.Out, keyJSON(k), output)
			}
			switch {
			case !resp.GetWasTrusted():
				fmt.Fprintf(o.Out, "release key %s trusted (ID %s)\n", shortKeyID(k.GetId()), k.GetId())
			case resp.GetPreviousComment() != k.GetComment():
				fmt.Fprintf(o.Out, "release key %s was trusted already; comment %q replaced by %q\n", shortKeyID(k.GetId()), resp.GetPreviousComment(), k.GetComment())
			default:
				fmt.Fprintf(o.Out, "release key %s was trusted already\n", shortKeyID(k.GetId()))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&comment, "comment", "", "a `TEXT` to remember the key by (who signs with it)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}

func newImageTrustListCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the trusted release keys",
		Long: `List the trusted release keys: ID (the first 16 hex digits; -o wide shows
all 64), COMMENT and ADDED (how long ago). An empty list means the hub
checks no release signatures.`,
		Example: `  roostctl image trust list
  roostctl image trust list -o yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case outTable, outWide, outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use table, wide, json or yaml", output)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.ListTrustedKeys(ctx, &roostv1.ListTrustedKeysRequest{})
			if err != nil {
				return o.wrapCallError(err)
			}
			if output == outJSON || output == outYAML {
				out := []trustedKeyJSON{}
				for _, k := range resp.GetKeys() {
					out = append(out, keyJSON(k))
				}
				return writeStructured(o.Out, out, output)
			}
			if len(resp.GetKeys()) == 0 {
				fmt.Fprintln(o.Err, "No release key is trusted: the hub records releases without checking their signatures.")
				return nil
			}
			tw := tabwriter.NewWriter(o.Out, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "ID\tCOMMENT\tADDED")
			for _, k := range resp.GetKeys() {
				id := k.GetId()
				if output != outWide {
					id = shortKeyID(id)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", id, orNone(tableCell(k.GetComment())), o.age(k.GetAddedAt().AsTime(), k.GetAddedAt() != nil))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, wide, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outWide, outJSON, outYAML))
	return cmd
}

func newImageTrustRemoveCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:     "remove ID...",
		Aliases: []string{"rm"},
		Short:   "Stop trusting release keys",
		Long: `Stop trusting release keys, each named by its ID or a unique prefix of it
(at least 4 hex digits; 'roostctl image trust list' shows them). Releases
already recorded stay. A prefix of several keys is refused, naming them.
Removing the last key turns signature checks off.`,
		Example:           `  roostctl image trust remove 3f2a9c01`,
		Args:              minArgs(1, "a key ID"),
		ValidArgsFunction: o.argCompletions(true, trustedKeyIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var failed error
			removed := false
			for _, id := range args {
				resp, err := conn.hub.UntrustReleaseKey(ctx, &roostv1.UntrustReleaseKeyRequest{Id: id})
				if err != nil {
					err = o.wrapCallError(err)
					if !isHubError(err) {
						return err
					}
					printError(o.Err, err)
					if failed == nil {
						failed = reportedError{exitCode(err)}
					}
					continue
				}
				if full := resp.GetId(); full != "" { // older hubs do not say
					id = shortKeyID(full)
				}
				fmt.Fprintf(o.Out, "release key %s no longer trusted\n", id)
				removed = true
			}
			if removed {
				if keys, err := conn.hub.ListTrustedKeys(ctx, &roostv1.ListTrustedKeysRequest{}); err == nil && len(keys.GetKeys()) == 0 {
					fmt.Fprintln(o.Err, "Warning: no release key is trusted now: the hub records releases without checking their signatures "+
						"(trust one with 'roostctl image trust add KEY.pub')")
				}
			}
			return failed
		},
	}
}

// ---- image list, describe

// releaseUsage counts the Revisions that boot each release (by name, or
// by version for Revisions that name none) and holds the Pools and the
// releases, to tell which release each Pool targets.
type releaseUsage struct {
	revisions map[string][]string // release name → Revision names
	pools     []*roostv1.Pool
	releases  []*roostv1.ImageRelease
}

// releasesOf returns the ImageReleases among objs.
func releasesOf(objs []*roostv1.Object) []*roostv1.ImageRelease {
	var rels []*roostv1.ImageRelease
	for _, o := range objs {
		if r := o.GetImageRelease(); r != nil {
			rels = append(rels, r)
		}
	}
	return rels
}

// newestRelease is the release a Pool that follows channel targets — or,
// with channel "", a Pool that names neither a channel nor a version: the
// newest (highest create index) on the channel, or of all, promoted or
// not. It is the hub's rule (hub/revisions.PickRelease); nil when there is
// none.
func newestRelease(rels []*roostv1.ImageRelease, channel string) *roostv1.ImageRelease {
	var newest *roostv1.ImageRelease
	for _, r := range rels {
		if channel != "" && !slices.Contains(r.GetSpec().GetChannels(), channel) {
			continue
		}
		if newest == nil || r.GetMetadata().GetCreateIndex() > newest.GetMetadata().GetCreateIndex() {
			newest = r
		}
	}
	return newest
}

// poolTarget says how Pool p targets release r now ("pinned", "follows
// stable", …), or "" when p's current target is another release (rels
// are all the releases).
func poolTarget(p *roostv1.Pool, r *roostv1.ImageRelease, rels []*roostv1.ImageRelease) string {
	s := p.GetSpec()
	switch {
	case s.GetImageVersion() != "":
		if s.GetImageVersion() == r.GetSpec().GetVersion() {
			return "pinned"
		}
	case s.GetImageChannel() != "":
		if newestRelease(rels, s.GetImageChannel()).GetMetadata().GetName() == r.GetMetadata().GetName() {
			return "follows " + s.GetImageChannel()
		}
	default:
		if newestRelease(rels, "").GetMetadata().GetName() == r.GetMetadata().GetName() {
			return "no channel or version: the newest release"
		}
	}
	return ""
}

func (u releaseUsage) revisionsOf(ir *roostv1.ImageRelease) []string {
	return u.revisions[ir.GetMetadata().GetName()]
}

// usage reads Revisions and Pools and indexes them by release.
func (o *options) usage(ctx context.Context, conn *hubConn, rels []*roostv1.Object, stale bool) (releaseUsage, error) {
	u := releaseUsage{revisions: map[string][]string{}, releases: releasesOf(rels)}
	byVersion := map[string]string{}
	for _, r := range rels {
		byVersion[r.GetImageRelease().GetSpec().GetVersion()] = r.GetImageRelease().GetMetadata().GetName()
	}
	revs, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "Revision", Consistency: consistency(stale)})
	if err != nil {
		return u, o.wrapCallError(err)
	}
	for _, ob := range revs.GetObjects() {
		s := ob.GetRevision().GetSpec()
		name := s.GetImageRelease()
		if name == "" {
			name = byVersion[s.GetImageVersion()]
		}
		u.revisions[name] = append(u.revisions[name], ob.GetRevision().GetMetadata().GetName())
	}
	pools, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "Pool", Consistency: consistency(stale)})
	if err != nil {
		return u, o.wrapCallError(err)
	}
	for _, ob := range pools.GetObjects() {
		if p := ob.GetPool(); p != nil {
			u.pools = append(u.pools, p)
		}
	}
	return u, nil
}

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

// signerOf is the keyID the release's manifest names, or "".
func signerOf(r *roostv1.ImageRelease) string {
	var m release.Manifest
	if err := json.Unmarshal(r.GetSpec().GetManifest(), &m); err != nil {
		return ""
	}
	return m.KeyID
}

// getRelease reads the ImageRelease of a version (or named so).
func (o *options) getRelease(ctx context.Context, conn *hubConn, arg string, stale bool) (*roostv1.ImageRelease, error) {
	resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "ImageRelease", Name: imageReleaseName(arg), Consistency: consistency(stale)})
	if statusCode(err) == codes.NotFound && strings.HasPrefix(arg, "v") && len(validation.IsDNS1123Label(arg)) == 0 {
		if r, err2 := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "ImageRelease", Name: arg, Consistency: consistency(stale)}); err2 == nil {
			resp, err = r, nil
		}
	}
	if err != nil {
		return nil, o.wrapCallError(releaseNotFound(err, arg))
	}
	return resp.GetObject().GetImageRelease(), nil
}

// releaseNotFound words a NotFound answer for the release version arg in
// the user's terms (the version given, not the object name the hub stores
// it under); other errors pass through.
func releaseNotFound(err error, arg string) error {
	if statusCode(err) != codes.NotFound {
		return err
	}
	return status.Errorf(codes.NotFound, "no image release %q ('roostctl image list' lists the versions)", arg)
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
	for _, k := range sortedKeys(spec.GetComponents()) {
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
	fmt.Fprintf(o.Out, "Used by:    %s\n", plural(len(revs), "Revision", "Revisions"))
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

// ---- image promote, delete

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

// ---- helpers

func (o *options) age(t time.Time, known bool) string {
	if !known {
		return "<unknown>"
	}
	return duration.HumanDuration(o.now().Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// tableCell keeps a value on one line.
func tableCell(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
