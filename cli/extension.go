package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/imagebuilder/sysext"
	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

// The extension verbs: push. Extensions are read and deleted with the
// generic verbs (roostctl get extensions, describe, delete extension).

func newExtensionCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "extension",
		Aliases: []string{"extensions", "ext"},
		Short:   "Push systemd-sysext images (Extensions) that MachineClasses add to their Machines",
		Long: `An Extension is one version of a signed systemd-sysext image: a squashfs file
that systemd-sysext merges over /usr (and /opt) at boot, with the kubelet,
roost-agent or site tools in it. 'roost-image sysext' builds one,
NAME-VERSION.raw, and writes its signed manifest beside it
(NAME-VERSION.raw.manifest.json and .manifest.json.sig); 'roostctl extension
push' uploads the image into the hub's content-addressed store and records the
Extension, named NAME-VERSION with every character other than a letter, a
digit or - replaced by - (kubelet v1.34.4 → kubelet-v1-34-4).

Extensions are immutable: the same name and version with another image is
refused; pushing the same files again changes nothing. They are signed and
checked like releases: once a release key is trusted ('roostctl image trust
add'), the hub records only Extensions a trusted key signed, and agents check
the signature before they stage one.

A MachineClass names the Extensions its Machines run in spec.extensions:
"NAME" for the newest version pushed, "NAME=VERSION" for that one. Each
Revision pins them by digest, so pushing a newer version of an extension a
class follows, or changing the list, gives each of the class's Machines a
new Revision, which rolls out by reboot inside its Pool's windows like any
change. The hub refuses a class (or a push) naming an extension it does not
hold, two extensions that ship the same file, or one built for another
architecture than a Server the class's Machines run on; and it refuses to
delete an Extension a class resolves to.

List, show and delete them with the usual verbs: 'roostctl get extensions',
'roostctl get extension NAME -o yaml', 'roostctl describe extension NAME',
'roostctl delete extension NAME'.`,
		Example: `  roost-image sysext --name kubelet --version v1.34.4 --file _output/kubelet:/usr/bin/kubelet --key release.key -o kubelet-v1.34.4.raw
  roostctl extension push kubelet-v1.34.4.raw --key release.pub
  roostctl get extensions`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newExtensionPushCommand(o))
	return cmd
}

func newExtensionPushCommand(o *options) *cobra.Command {
	var keyFile, output string
	cmd := &cobra.Command{
		Use:   "push NAME-VERSION.raw",
		Short: "Upload a signed extension image and record its Extension",
		Long: `Push an extension image that 'roost-image sysext' built to the hub: read its
manifest and signature beside it (NAME-VERSION.raw.manifest.json and
.manifest.json.sig), check them locally (the image's size and sha256, the
manifest's shape, and with --key the signature), upload the image unless the
hub member already holds it — resuming an interrupted upload where it
stopped — and record the Extension.

An unsigned image is refused before anything is uploaded (exit code 2), as is
one the hub would refuse: a manifest that does not describe the image, a
name or version the hub cannot name an Extension after. The signature is
also checked against the hub's trusted release keys before the upload; while
the hub trusts no key (and without --key) it is not checked at all, and both
roostctl and the hub warn.

The summary names the MachineClasses that follow the extension ("NAME") and
now resolve to the pushed version: their Machines get new Revisions, which
roll out by reboot inside their Pools' windows. A progress bar is shown on a
terminal. --timeout bounds each call but not the upload itself.`,
		Example: `  roostctl extension push kubelet-v1.34.4.raw --key release.pub
  roostctl extension push _output/roost-agent-0.4.0.raw -o yaml`,
		Args:              exactArgs(1, "an extension image NAME-VERSION.raw"),
		ValidArgsFunction: rawFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCreateOutput(output); err != nil {
				return err
			}
			return o.pushExtension(cmd.Context(), args[0], keyFile, output)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "ed25519 public key `PUBKEY_FILE` (PEM, from 'roost-image keygen') the\nmanifest's signature must verify with")
	addObjectOutputFlag(cmd, &output, "print the Extension as json, yaml or name instead of the summary")
	_ = cmd.MarkFlagFilename("key", "pub", "pem")
	return cmd
}

// rawFileCompletions completes extension images (.raw files).
func rawFileCompletions(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return []cobra.Completion{"raw"}, cobra.ShellCompDirectiveFilterFileExt
}

// pushExtension is 'roostctl extension push raw'.
func (o *options) pushExtension(ctx context.Context, raw, keyFile, output string) error {
	x, err := loadExtension(raw, keyFile)
	if err != nil {
		return err
	}
	conn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := o.checkExtensionTrusted(ctx, conn, raw, x, keyFile != ""); err != nil {
		return err
	}
	s := x.GetSpec()
	p, err := o.pushArtifact(ctx, conn, raw, release.Artifact{Name: filepath.Base(raw), SHA256: s.GetImage().GetSha256(), Size: s.GetImage().GetSize()},
		output == "" && isTerminal(o.Err))
	if err != nil {
		return err
	}
	cctx, cancel := o.withTimeout(ctx)
	defer cancel()
	var hdr metadata.MD
	resp, err := conn.hub.Apply(cctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{resource.Wrap(x)}}, grpc.Header(&hdr))
	if err != nil {
		return o.wrapCallError(err)
	}
	printWarnings(o.Err, hdr)
	action := "pushed"
	if r := resp.GetResults(); len(r) == 1 {
		action = r[0].GetAction()
	}
	got, err := conn.hub.Get(cctx, &roostv1.GetRequest{Kind: "Extension", Name: x.GetMetadata().GetName()})
	if err != nil {
		return o.wrapCallError(err)
	}
	obj := got.GetObject()
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
	what := "already stored"
	if p.uploaded > 0 || p.size == 0 {
		what = "uploaded " + formatBytes(p.uploaded)
		if p.uploaded < p.size {
			what += " (resumed)"
		}
	}
	fmt.Fprintf(o.Out, "%s  sha256:%s  %s  %s\n", p.name, p.sha256[:12], formatBytes(p.size), what)
	arch := s.GetArchitecture()
	if arch == "" {
		arch = "any architecture"
	}
	fmt.Fprintf(o.Out, "%s %s (%s %s, %s, %d %s)\n", objectRef(obj), action, s.GetName(), s.GetVersion(), arch,
		len(s.GetPaths()), english.Plural(len(s.GetPaths()), "path", "paths"))
	if classes := o.followers(ctx, conn, obj.GetExtension()); len(classes) > 0 {
		fmt.Fprintf(o.Out, "%s %s %s %s: %s to %s %s by reboot, inside their Pools' windows\n",
			english.Plural(len(classes), "MachineClass", "MachineClasses"), shortList(classes, maxPoolsShown), english.Plural(len(classes), "follows", "follow"),
			s.GetName(), english.Plural(len(classes), "its Machines move", "their Machines move"), s.GetName(), s.GetVersion())
	}
	return nil
}

// loadExtension reads the extension image raw with its signed manifest
// (sysext.LoadBundle, which checks the image's size and sha256 and, with
// keyFile, the signature) and returns the Extension to push, checked as
// the hub checks it. Errors are usage errors (exit code 2): nothing was
// uploaded.
func loadExtension(raw, keyFile string) (*roostv1.Extension, error) {
	var pub ed25519.PublicKey
	if keyFile != "" {
		var err error
		if pub, err = release.LoadPublicKey(keyFile); err != nil {
			return nil, usageErrorf("--key: %w", err)
		}
	}
	b, err := sysext.LoadBundle(raw, pub)
	if err != nil {
		return nil, usageErrorf("%w; nothing was uploaded", err)
	}
	if !b.Signed {
		return nil, usageErrorf("extension %s is not signed: %s is missing (sign it: roost-image sysext --key KEY); the hub records only signed extensions, so nothing was uploaded",
			raw, filepath.Base(raw+sysext.SignatureSuffix))
	}
	x, err := resource.ExtensionFromManifest(b.ManifestJSON, b.Signature)
	if err != nil {
		return nil, usageErrorf("%s: %w; nothing was uploaded", raw+sysext.ManifestSuffix, err)
	}
	if vs := resource.Validate(resource.Wrap(x)); len(vs) > 0 {
		var lines []string
		for _, v := range vs {
			lines = append(lines, "  "+v.String())
		}
		return nil, usageErrorf("%s: the hub would refuse this extension, so nothing was uploaded:\n%s", raw+sysext.ManifestSuffix, strings.Join(lines, "\n"))
	}
	return x, nil
}

// checkExtensionTrusted checks x's signature against the hub's trusted
// release keys before anything is uploaded; with no key trusted it warns
// that nothing checks it, unless checkedLocally (--key).
func (o *options) checkExtensionTrusted(ctx context.Context, conn *hubConn, raw string, x *roostv1.Extension, checkedLocally bool) error {
	cctx, cancel := o.withTimeout(ctx)
	defer cancel()
	resp, err := conn.hub.ListTrustedKeys(cctx, &roostv1.ListTrustedKeysRequest{})
	if err != nil {
		return o.wrapCallError(err)
	}
	if len(resp.GetKeys()) == 0 {
		if !checkedLocally {
			fmt.Fprintf(o.Err, "warning: the signature of %s was not checked locally: the hub trusts no release key "+
				"(pass --key PUBKEY_FILE, or trust one with 'roostctl image trust add KEY.pub')\n", raw+sysext.ManifestSuffix)
		}
		return nil
	}
	var keys []ed25519.PublicKey
	for _, k := range resp.GetKeys() {
		if pub, err := releasesig.ParsePublicKeyPEM([]byte(k.GetPublicKeyPem())); err == nil {
			keys = append(keys, pub)
		}
	}
	err = releasesig.VerifyExtension(releasesig.FromExtension(x.GetSpec()), keys)
	if err == nil {
		o.debugf("%s: signed by a key the hub trusts", raw+sysext.ManifestSuffix)
		return nil
	}
	if !errors.Is(err, releasesig.ErrUntrusted) {
		return usageErrorf("%s: %w; nothing was uploaded", raw+sysext.ManifestSuffix, err)
	}
	signer := "an unknown key"
	if m, perr := releasesig.ParseExtensionManifest(x.GetSpec().GetManifest()); perr == nil && m.KeyID != "" {
		signer = "key " + m.KeyID
	}
	return fmt.Errorf("%s: %w; it is signed by %s, which the hub does not trust (see 'roostctl image trust list'): "+
		"trust it with 'roostctl image trust add KEY.pub' or sign the extension with a trusted key; nothing was uploaded",
		raw+sysext.ManifestSuffix, err, signer)
}

// followers returns the names of the MachineClasses that follow x's
// extension by name ("NAME") and resolve to x, sorted. A failed List
// leaves them out: the hint is a courtesy.
func (o *options) followers(ctx context.Context, conn *hubConn, x *roostv1.Extension) []string {
	cctx, cancel := o.withTimeout(ctx)
	defer cancel()
	classes, err := conn.hub.List(cctx, &roostv1.ListRequest{Kind: "MachineClass"})
	if err != nil {
		o.debugf("list MachineClasses for the push summary: %v", err)
		return nil
	}
	exts, err := conn.hub.List(cctx, &roostv1.ListRequest{Kind: "Extension"})
	if err != nil {
		o.debugf("list Extensions for the push summary: %v", err)
		return nil
	}
	name := x.GetSpec().GetName()
	for _, ob := range exts.GetObjects() {
		if s := ob.GetExtension().GetSpec(); s.GetName() == name && resource.CompareExtensionVersions(s.GetVersion(), x.GetSpec().GetVersion()) > 0 {
			return nil // x is not the newest: the classes keep what they run
		}
	}
	var out []string
	for _, ob := range classes.GetObjects() {
		for _, ref := range ob.GetMachineClass().GetSpec().GetExtensions() {
			if ref == name {
				out = append(out, ob.GetMachineClass().GetMetadata().GetName())
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
