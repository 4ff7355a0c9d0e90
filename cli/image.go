package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// pushChunkSize is the data size in bytes of each PushArtifact message.
const pushChunkSize = 1 << 20

func newImageCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "image",
		Aliases: []string{"images"},
		Short:   "Push, list, promote and delete OS image releases; trust release keys",
		Long: `An ImageRelease is one OS image: a kernel, an initrd (the whole OS, run
from RAM) and the systemd-boot EFI binary, described by a signed
release.json. 'roost-image release' makes a release bundle (a directory);
'roostctl image push' uploads its artifacts into the hub's content-addressed
store and records the ImageRelease. Releases are immutable; only their
channels change: 'roostctl image promote' puts a release on a channel, and
Pools that follow the channel move to its newest release. A Pool that names
neither a channel nor a version (spec.imageChannel, spec.imageVersion)
follows the newest release recorded, promoted or not: fine for a lab;
production Pools should follow a channel.

Once a release key is trusted ('roostctl image trust add KEY.pub'), the hub
records only releases a trusted key signed. A release that a Revision names
(booted, staged or in a Server's boot history) or a Pool pins cannot be
deleted.`,
		Example: `  roost-image release --manifest images/flatcar-stable.yaml --key release.key -o _output/bundle
  roostctl image trust add release.pub
  roostctl image push _output/bundle
  roostctl image promote 2026.11.0 --channel stable
  roostctl image list`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImagePushCommand(o), newImageListCommand(o), newImageDescribeCommand(o), newImagePromoteCommand(o),
		newImageDeleteCommand(o), newImageTrustCommand(o))
	return cmd
}

// pushedArtifact is what push did with one artifact.
type pushedArtifact struct {
	name, sha256 string
	size         int64
	uploaded     int64 // bytes sent now; 0 when the hub had it
}

func newImagePushCommand(o *options) *cobra.Command {
	var keyFile, output string
	cmd := &cobra.Command{
		Use:   "push BUNDLE_DIR",
		Short: "Upload a release bundle's artifacts and record its ImageRelease",
		Long: `Push a release bundle (made by 'roost-image release') to the hub: check it
locally (every artifact's sha256, and with --key the signature of
release.json), upload each artifact the hub member does not hold yet —
resuming an interrupted upload where it stopped — and create or update the
ImageRelease named after the version (2026.11.0 → v2026-11-0). A version is
1–64 characters of lower-case letters, digits and . + _ -, starting with a
digit, ending with a letter or digit, with no two of . + _ - in a row
(2026.11.0, 2026.11.0-rc.1); a bundle with another version is refused before
anything is uploaded (exit code 2). Two versions that differ only in their
separators (2026.11.0, 2026-11-0) share a name: the hub refuses the second.

A new release is on no channel. Pools that follow a channel move to it
once it is promoted ('roostctl image promote'); Pools that name no channel
and no version move to it right away, and the summary names them.

Without --key the bundle must still be signed (release.json.sig). Either
way, the signature is also checked locally against the hub's trusted
release keys before anything is uploaded, so a release the hub would refuse
is not sent. While the hub trusts no key (and without --key), the signature
is not checked at all and both roostctl and the hub warn. Pushing the same bundle again uploads nothing and
leaves the ImageRelease unchanged; channels the release was promoted to are
kept.

Artifacts are stored on the hub member that answers; other members copy
them from it when an agent or a release needs them there. A progress bar
is shown on a terminal. --timeout bounds each call but not the uploads
themselves.`,
		Example: `  roostctl image push _output/bundle --key release.pub
  roostctl image push _output/bundle -o yaml`,
		Args: exactArgs(1, "a BUNDLE_DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", outJSON, outYAML, outName:
			default:
				return usageErrorf("--output %q: use json, yaml or name (or nothing for text)", output)
			}
			b, manifest, sig, err := o.loadBundle(args[0], keyFile)
			if err != nil {
				return err
			}
			if err := release.ValidateVersion(b.Manifest.Version); err != nil {
				return usageErrorf("%s: version %w; the hub refuses it, so nothing was uploaded: make the release again with a valid version (roost-image release)",
					filepath.Join(args[0], release.ManifestFile), err)
			}
			conn, err := o.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx := cmd.Context()
			if err := o.checkTrusted(ctx, conn, args[0], b, manifest, sig, keyFile != ""); err != nil {
				return err
			}
			showBar := output == "" && isTerminal(o.Err)

			var pushed []pushedArtifact
			for _, name := range []string{"kernel", "initrd", "bootloader"} {
				a, ok := b.Manifest.Artifact(name)
				if !ok {
					continue
				}
				p, err := o.pushArtifact(ctx, conn, b.Path(name), a, showBar)
				if err != nil {
					return err
				}
				pushed = append(pushed, p)
			}

			ir, err := o.releaseObject(ctx, conn, b, manifest, sig)
			if err != nil {
				return err
			}
			cctx, cancel := o.withTimeout(ctx)
			defer cancel()
			var hdr metadata.MD
			resp, err := conn.hub.PutImageRelease(cctx, &roostv1.PutImageReleaseRequest{Release: ir}, grpc.Header(&hdr))
			if err != nil {
				return o.wrapCallError(err)
			}
			printWarnings(o.Err, hdr)
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
			tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
			for _, p := range pushed {
				what := "already stored"
				if p.uploaded > 0 || p.size == 0 {
					what = "uploaded " + formatBytes(p.uploaded)
					if p.uploaded < p.size {
						what += " (resumed)"
					}
				}
				fmt.Fprintf(tw, "%s\tsha256:%s\t%s\t%s\n", p.name, p.sha256[:12], formatBytes(p.size), what)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			rel := resp.GetRelease()
			fmt.Fprintf(o.Out, "%s %s (version %s)\n", objectRef(obj), resp.GetAction(), rel.GetSpec().GetVersion())
			if len(rel.GetSpec().GetChannels()) == 0 {
				ch := b.Manifest.Channel
				if ch == "" {
					ch = "CHANNEL"
				}
				fmt.Fprintf(o.Out, "on no channel yet: Pools that follow a channel move to it after 'roostctl image promote %s --channel %s'\n",
					rel.GetSpec().GetVersion(), ch)
				if pools := o.channelLessPools(ctx, conn, rel, resp.GetAction() == "created"); len(pools) > 0 {
					fmt.Fprintf(o.Out, "but %s %s %s no channel and no version: %s to %s right away, promoted or not "+
						"(set spec.imageChannel to make %s wait for a promotion)\n",
						english.Plural(len(pools), "Pool", "Pools"), shortList(pools, maxPoolsShown), english.Plural(len(pools), "names", "name"),
						english.Plural(len(pools), "it moves", "they move"), rel.GetSpec().GetVersion(), english.Plural(len(pools), "it", "them"))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "ed25519 public key `PUBKEY_FILE` (PEM, from 'roost-image keygen') the\nbundle's signature must verify with")
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the ImageRelease as json, yaml or name instead of the summary")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML, outName))
	return cmd
}

// maxPoolsShown is how many Pool names the push hint lists.
const maxPoolsShown = 5

// channelLessPools returns the names of the Pools that name neither an
// image channel nor a version and so target the newest release of all,
// when that is rel (created: rel was just recorded, so it is the newest).
// A failed List leaves them out: the hint is a courtesy.
func (o *options) channelLessPools(ctx context.Context, conn *hubConn, rel *roostv1.ImageRelease, created bool) []string {
	cctx, cancel := o.withTimeout(ctx)
	defer cancel()
	resp, err := conn.hub.List(cctx, &roostv1.ListRequest{Kind: "Pool"})
	if err != nil {
		o.debugf("list Pools for the push hint: %v", err)
		return nil
	}
	var names []string
	for _, ob := range resp.GetObjects() {
		if s := ob.GetPool().GetSpec(); s.GetImageChannel() == "" && s.GetImageVersion() == "" {
			names = append(names, ob.GetPool().GetMetadata().GetName())
		}
	}
	if len(names) == 0 {
		return nil
	}
	if !created {
		rels, err := conn.hub.List(cctx, &roostv1.ListRequest{Kind: "ImageRelease"})
		if err != nil {
			o.debugf("list ImageReleases for the push hint: %v", err)
			return nil
		}
		if newestRelease(releasesOf(rels.GetObjects()), "").GetMetadata().GetName() != rel.GetMetadata().GetName() {
			return nil
		}
	}
	sort.Strings(names)
	return names
}

// shortList joins the first limit names with ", " and says how many more
// there are.
func shortList(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ", "), len(names)-limit)
}

// loadBundle reads and checks the bundle in dir and returns it with the
// raw release.json and the signature (trimmed).
func (o *options) loadBundle(dir, keyFile string) (*release.Bundle, []byte, string, error) {
	var pub ed25519.PublicKey
	if keyFile != "" {
		var err error
		if pub, err = release.LoadPublicKey(keyFile); err != nil {
			return nil, nil, "", usageErrorf("--key: %w", err)
		}
	}
	b, err := release.Load(dir, pub)
	if err != nil {
		return nil, nil, "", usageError{err}
	}
	if !b.Signed {
		return nil, nil, "", usageErrorf("release bundle %s is not signed: %s is missing (sign it: roost-image release --manifest DEF --key KEY)",
			dir, filepath.Join(dir, release.SignatureFile))
	}
	manifest, err := os.ReadFile(filepath.Join(dir, release.ManifestFile))
	if err != nil {
		return nil, nil, "", usageError{err}
	}
	sig, err := os.ReadFile(filepath.Join(dir, release.SignatureFile))
	if err != nil {
		return nil, nil, "", usageError{err}
	}
	if _, ok := b.Manifest.Artifact("bootloader"); !ok {
		o.debugf("bundle %s has no bootloader artifact", dir)
	}
	return b, manifest, strings.TrimSpace(string(sig)), nil
}

// releaseObject builds the ImageRelease of bundle b, keeping the labels
// and annotations of a stored one. It carries no channels: the hub keeps
// the channels of a recorded release (only 'roostctl image promote'
// changes them), so a push never writes back channels it read and cannot
// undo a promotion that lands between its read and its write.
func (o *options) releaseObject(ctx context.Context, conn *hubConn, b *release.Bundle, manifest []byte, sig string) (*roostv1.ImageRelease, error) {
	m := b.Manifest
	ir := &roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: imageReleaseName(m.Version)}, Spec: release.Spec(&m, manifest, sig)}
	cctx, cancel := o.withTimeout(ctx)
	defer cancel()
	resp, err := conn.hub.Get(cctx, &roostv1.GetRequest{Kind: "ImageRelease", Name: ir.Metadata.Name})
	switch {
	case apierror.Code(err) == codes.NotFound:
	case err != nil:
		return nil, o.wrapCallError(err)
	default:
		old := resp.GetObject().GetImageRelease()
		ir.Metadata.Labels = old.GetMetadata().GetLabels()
		ir.Metadata.Annotations = old.GetMetadata().GetAnnotations()
	}
	return ir, nil
}

// imageReleaseName is the hub's naming rule for ImageReleases (the hub
// checks it): "v" and the lower-cased version, every character that is not
// a letter or digit replaced by "-" (release.Name).
func imageReleaseName(version string) string { return release.Name(version) }

// pushArtifact uploads the part of artifact a (file path) the hub member
// does not hold yet.
func (o *options) pushArtifact(ctx context.Context, conn *hubConn, path string, a release.Artifact, showBar bool) (pushedArtifact, error) {
	p := pushedArtifact{name: a.Name, sha256: a.SHA256, size: a.Size}
	cctx, cancel := o.withTimeout(ctx)
	st, err := conn.hub.StatArtifact(cctx, &roostv1.StatArtifactRequest{Sha256: a.SHA256})
	cancel()
	if err != nil {
		return p, o.wrapCallError(err)
	}
	if st.GetComplete() {
		o.debugf("%s sha256 %s: already stored", a.Name, a.SHA256)
		return p, nil
	}
	offset := st.GetSize()
	if offset > a.Size {
		return p, fmt.Errorf("%s: the hub holds %d bytes of an upload of sha256 %s, more than its %d bytes", a.Name, offset, a.SHA256, a.Size)
	}
	f, err := os.Open(path)
	if err != nil {
		return p, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return p, err
	}
	var bar *progressbar.ProgressBar
	if showBar {
		bar = progressbar.NewOptions64(a.Size, progressbar.OptionSetWriter(o.Err), progressbar.OptionSetDescription(a.Name),
			progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		_ = bar.Set64(offset)
		defer bar.Finish()
	}
	uctx, ucancel := context.WithCancel(ctx)
	defer ucancel()
	stream, err := conn.hub.PushArtifact(uctx)
	if err != nil {
		return p, o.wrapCallError(err)
	}
	sent := offset
	first := true
	for sent < a.Size || first {
		// A fresh buffer per message: gRPC may keep a sent message.
		buf := make([]byte, min(int64(pushChunkSize), a.Size-sent))
		n, rerr := io.ReadFull(f, buf)
		if rerr != nil {
			return p, fmt.Errorf("%s: read %s at byte %d: %w (did the file change since it was checked?)", a.Name, path, sent+int64(n), rerr)
		}
		req := &roostv1.PushArtifactRequest{Data: buf}
		if first {
			req.Sha256, req.Size, req.Offset = a.SHA256, a.Size, offset
			first = false
		}
		if err := stream.Send(req); err != nil {
			if errors.Is(err, io.EOF) {
				break // the hub ended the stream: CloseAndRecv says why
			}
			return p, o.wrapCallError(err)
		}
		sent += int64(n)
		if bar != nil {
			_ = bar.Set64(sent)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return p, withContext{context: fmt.Sprintf("push %s (sha256 %s)", a.Name, a.SHA256), err: o.wrapCallError(err)}
	}
	if resp.GetSize() != a.Size {
		return p, fmt.Errorf("push %s (sha256 %s): the hub stored %d of %d bytes; run the command again to resume", a.Name, a.SHA256, resp.GetSize(), a.Size)
	}
	p.uploaded = a.Size - offset
	return p, nil
}

// checkTrusted checks the signature of bundle b (in dir) against the
// hub's trusted release keys before anything is uploaded; with no key
// trusted it warns that nothing checks it, unless checkedLocally (--key).
func (o *options) checkTrusted(ctx context.Context, conn *hubConn, dir string, b *release.Bundle, manifest []byte, sig string, checkedLocally bool) error {
	cctx, cancel := o.withTimeout(ctx)
	defer cancel()
	resp, err := conn.hub.ListTrustedKeys(cctx, &roostv1.ListTrustedKeysRequest{})
	if err != nil {
		return o.wrapCallError(err)
	}
	if len(resp.GetKeys()) == 0 {
		if checkedLocally {
			return nil
		}
		fmt.Fprintf(o.Err, "warning: the signature of %s was not checked locally: the hub trusts no release key "+
			"(pass --key PUBKEY_FILE, or trust one with 'roostctl image trust add KEY.pub')\n", filepath.Join(dir, release.ManifestFile))
		return nil
	}
	var keys []ed25519.PublicKey
	for _, k := range resp.GetKeys() {
		if pub, err := releasesig.ParsePublicKeyPEM([]byte(k.GetPublicKeyPem())); err == nil {
			keys = append(keys, pub)
		}
	}
	rel := releasesig.Release{Version: b.Manifest.Version, Manifest: manifest, Signature: sig}
	for name, dst := range map[string]**roostv1.Artifact{"kernel": &rel.Kernel, "initrd": &rel.Initrd, "bootloader": &rel.BootLoader} {
		if a, ok := b.Manifest.Artifact(name); ok {
			*dst = &roostv1.Artifact{Sha256: a.SHA256, Size: a.Size}
		}
	}
	if _, err := releasesig.Verify(rel, keys); err != nil {
		signer := "an unknown key"
		if b.Manifest.KeyID != "" {
			signer = "key " + b.Manifest.KeyID
		}
		return fmt.Errorf("%s: %w; it is signed by %s, which the hub does not trust (see 'roostctl image trust list'): "+
			"trust it with 'roostctl image trust add KEY.pub' or sign the release with a trusted key; nothing was uploaded",
			filepath.Join(dir, release.ManifestFile), err, signer)
	}
	o.debugf("%s: signed by a key the hub trusts", filepath.Join(dir, release.ManifestFile))
	return nil
}

// printWarnings prints the hub's warnings (api.WarningHeader) from a
// response header.
func printWarnings(w io.Writer, hdr metadata.MD) {
	for _, msg := range hdr.Get("roost-warning") {
		fmt.Fprintf(w, "Warning from hub: %s\n", msg)
	}
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// formatBytes renders n bytes with a binary unit.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
