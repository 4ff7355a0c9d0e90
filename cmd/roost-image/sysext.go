package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/imagebuilder/sysext"
)

type sysextFlags struct {
	name, version, from          string
	files                        []string
	arch                         string
	osID, sysextLevel, versionID string
	key, out                     string
}

func newSysextCmd() *cobra.Command {
	var f sysextFlags
	cmd := &cobra.Command{
		Use:   "sysext --name NAME --version VERSION (--from DIR | --file SRC:DEST ...) [-o NAME-VERSION.raw]",
		Short: "Build a system extension (systemd-sysext squashfs image) with reproducible bytes",
		Long: `Build an Extension: a systemd-sysext image that adds files under /usr and
/opt when a Machine boots (the kubelet, roost-agent, site tools). A
MachineClass names the extensions its Machines run.

The image holds the files of --from DIR (whose contents are the image's
root: DIR/usr/bin/x becomes /usr/bin/x) and of each --file SRC:DEST (DEST an
absolute path under /usr or /opt), plus
/usr/lib/extension-release.d/extension-release.NAME, which tells
systemd-sysext where the image may be merged:

  ID=_any                  any OS (or --os-id ID with --sysext-level or
                           --version-id, compared with the host's os-release)
  ARCHITECTURE=x86-64      --arch, systemd's names (x86-64, arm64, …); the
                           default is this machine's; --arch any omits it
  SYSEXT_ID=NAME
  SYSEXT_VERSION_ID=VERSION

The same inputs give the same bytes: files are copied with modes 0755
(executable) or 0644, owned by root, with every timestamp 0, and packed by
mksquashfs (Debian package squashfs-tools) with -reproducible and gzip.

With --key (from 'roost-image keygen'), it also writes OUT.manifest.json
(name, version, architecture, size, sha256 and paths of the image) and its
ed25519 signature OUT.manifest.json.sig, which the hub and the agent verify
as they verify a release. It prints the image's path, size and sha256.

Names are letters, digits and . _ - (starting with a letter or digit);
versions may also hold + and ~. systemd-sysext looks for
extension-release.NAME by the image's file name: on a host the image must
be called NAME.raw (or be a link of that name).`,
		Example: `  # the kubelet as an extension, signed
  roost-image sysext --name kubelet --version v1.34.4 \
      --file _output/kubelet:/usr/bin/kubelet --key ~/.roost/release.key

  # a tree of site tools, for Flatcar's sysext level 1.0 only
  roost-image sysext --name site-tools --version 2026.11.0 --from ./site-tools \
      --os-id flatcar --sysext-level 1.0 -o _output/site-tools-2026.11.0.raw

  roost-image inspect kubelet-v1.34.4.raw`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runSysext(cmd.OutOrStdout(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "extension name (the NAME of extension-release.NAME), e.g. kubelet")
	fl.StringVar(&f.version, "version", "", "extension version (SYSEXT_VERSION_ID), e.g. v1.34.4")
	fl.StringVar(&f.from, "from", "", "directory whose contents are the image's root (it holds usr/… and opt/…)")
	fl.StringArrayVar(&f.files, "file", nil, "SRC:DEST: add file SRC at absolute path DEST under /usr or /opt (repeatable)")
	fl.StringVar(&f.arch, "arch", sysext.HostArch(), "ARCHITECTURE, systemd's name (x86-64, arm64, …), or any to leave it out")
	fl.StringVar(&f.osID, "os-id", "", "ID of the OS the extension is for (default _any: every OS); needs --sysext-level or --version-id")
	fl.StringVar(&f.sysextLevel, "sysext-level", "", "with --os-id: the OS's SYSEXT_LEVEL the extension fits")
	fl.StringVar(&f.versionID, "version-id", "", "with --os-id: the OS's VERSION_ID the extension fits")
	fl.StringVar(&f.key, "key", "", "ed25519 private key (from 'roost-image keygen') to sign OUT.manifest.json")
	fl.StringVarP(&f.out, "output", "o", "", "image file (default NAME-VERSION.raw in the current directory)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("version")
	return cmd
}

func runSysext(w io.Writer, f sysextFlags) error {
	o := sysext.Options{Name: f.name, Version: f.version, From: f.from, Arch: f.arch,
		OSID: f.osID, SysextLevel: f.sysextLevel, VersionID: f.versionID}
	for _, s := range f.files {
		spec, err := sysext.ParseFileSpec(s)
		if err != nil {
			return usageError{err: err}
		}
		o.Files = append(o.Files, spec)
	}
	if err := o.Check(); err != nil {
		return usageError{err: err}
	}
	out := f.out
	if out == "" {
		out = f.name + "-" + f.version + ".raw"
	}
	var key []byte
	if f.key != "" {
		k, err := release.LoadPrivateKey(f.key)
		if err != nil {
			return fmt.Errorf("--key: %w", err)
		}
		key = k
	}
	info, err := sysext.Build(o, out)
	if err != nil {
		return err
	}
	arch := info.Architecture
	if arch == "" {
		arch = "any architecture"
	}
	fmt.Fprintf(w, "wrote %s: extension %s %s for %s, %d files\n", out, info.Name, info.Version, arch, len(info.Paths))
	fmt.Fprintf(w, "  size    %d bytes\n", info.Size)
	fmt.Fprintf(w, "  sha256  %s\n", info.SHA256)
	if key == nil {
		if err := sysext.RemoveManifest(out); err != nil {
			return err
		}
		fmt.Fprintf(w, "not signed (no --key): no manifest written\n")
		return nil
	}
	m := sysext.ManifestFor(info, out)
	if _, err := sysext.WriteManifest(out, m, key); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s%s, signed with key %s (%s%s)\n", out, sysext.ManifestSuffix, m.KeyID, out, sysext.SignatureSuffix)
	return nil
}

// inspectSysext describes the extension image p: what Inspect reads, the
// problems Validate finds (any architecture accepted) and whether a
// manifest beside it describes it.
func inspectSysext(w io.Writer, p string) error {
	info, err := sysext.Inspect(p)
	if err != nil {
		return err
	}
	if err := info.Write(w, p); err != nil {
		return err
	}
	b, err := sysext.LoadBundle(p, nil)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(w, "Manifest:     none (roost-image sysext --key writes %s%s)\n", p, sysext.ManifestSuffix)
	case err != nil:
		fmt.Fprintf(w, "Manifest:     BAD: %v\n", err)
	case b.Manifest.Describes(info) != nil:
		fmt.Fprintf(w, "Manifest:     BAD: %v\n", b.Manifest.Describes(info))
	case b.Signed:
		fmt.Fprintf(w, "Manifest:     %s%s, matches the image, signed by key %s (signature not checked here)\n", p, sysext.ManifestSuffix, b.Manifest.KeyID)
	default:
		fmt.Fprintf(w, "Manifest:     %s%s, matches the image, not signed\n", p, sysext.ManifestSuffix)
	}
	if err := sysext.Validate(info, sysext.Want{Architecture: sysext.ArchAny}); err != nil {
		fmt.Fprintf(w, "Problems (the hub would refuse this extension):\n")
		for _, e := range unjoin(err) {
			fmt.Fprintf(w, "  - %v\n", e)
		}
	}
	return nil
}

// unjoin splits an errors.Join error into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
