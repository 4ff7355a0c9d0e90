package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentconfig "github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/imagebuilder"
	"github.com/roostfleet/roost/imagebuilder/feed"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/imagebuilder/iso"
	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/imagebuilder/sysext"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/version"
)

// now is the clock (tests replace it).
var now = time.Now

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "roost-image",
		Short: "Bake Roost enrollment images, release bundles and system extensions",
		Long: `roost-image bakes the images a Server first boots from: a hybrid ISO (BIOS
isolinux + UEFI GRUB, for BMC virtual media, a CD or, isohybrid, a USB stick) or
a raw GPT disk image (UEFI only), holding an ImageRelease's kernel and initrd and an
Ignition config that starts roost-agent with the hub endpoints, the pinned hub
CA and an enrollment token.

Images are reproducible: the same inputs give the same bytes.

Exit codes (as roostctl's): 0 success, 1 failure, 2 bad usage (unknown
commands or flags, wrong arguments, missing or invalid flag values, release
keys that do not verify the release).`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE:          unknownCommand,
		// cobra checks required flags only after this hook; check them
		// here so that a missing one is a usage error.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return usageError{err: err, help: true}
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err: err, help: true} })
	root.AddCommand(newEnrollCmd(), newInspectCmd(), newReleaseCmd(), newPublishCmd(), newSysextCmd(), newKeygenCmd())
	return root
}

type enrollFlags struct {
	release, kernel, initrd string
	config                  string
	hubs                    []string
	ca                      string
	token                   string
	createToken             bool
	maxUses                 int32
	pool                    string
	expires                 string
	networkProfile          string
	sshKeys, releaseKeys    []string
	userConfigs             []string
	out                     string
	format                  string
	isolinux, ldlinux, grub string
	isohybridMBR            string
	cmdline                 []string
	extensions              []string
	quiet                   bool
}

func newEnrollCmd() *cobra.Command {
	var f enrollFlags
	cmd := &cobra.Command{
		Use:   "enroll -o FILE",
		Short: "Bake an enrollment image (ISO or raw disk)",
		Long: `Bake an enrollment image. The Server boots it live from RAM; Ignition writes
/etc/roost/agent.yaml (hubs, CA, token) and starts roost-agent, which enrolls
with the hub.

Hub endpoints and the CA come from an admin.conf (--config, default
$ROOST_CONFIG or ~/.roost/config) or from --hub and --ca. The token comes from
--token (from 'roostctl token create') or --create-token, which asks the hub
for one. --expires records when the token expires; an expired token is refused.

User configs (--user-config, repeatable) are Ignition v3 JSON (merged with
Ignition's merge rules) or Container Linux Config YAML (translated: files,
directories, links, units, drop-ins and users; anything else is refused).
Roost's own files and the agent unit cannot be overridden (drop-ins can).

With --release and --release-key, one of the keys must verify the bundle's
signature (release.json.sig), as the agent checks before it installs a
release: an image whose agent would refuse its own release is not written.

System extensions (--extension, repeatable: .raw images from 'roost-image
sysext') are merged into the live OS by systemd-sysext before the agent
starts. An OS image without Roost's agent (a stock Flatcar, the testbed) needs
the roost-agent extension; when the release lists its components and
roost-agent is not among them, an image without it is refused. Push the same
file to the hub (roostctl extension push) and every installed Machine runs it
too. With --release-key each extension must be signed by one of the keys.`,
		Example: `  # ISO from a release bundle, hubs and CA from admin.conf, a fresh token
  roost-image enroll --release _output/testbed/bundle --config /tmp/roost-hub/admin.conf \
      --create-token --expires 72h -o enroll.iso

  # an OS image without the agent: carry the roost-agent extension
  roost-image sysext --name roost-agent --version 0.4.0 --file bin/roost-agent:/usr/bin/roost-agent \
      --key release.key -o roost-agent-0.4.0.raw
  roost-image enroll --release flatcar-bundle --config admin.conf --create-token \
      --release-key release.pub --extension roost-agent-0.4.0.raw -o enroll.iso

  # raw USB image, explicit hub, CA and token, an LACP enrollment profile and SSH key
  roost-image enroll --kernel vmlinuz --initrd initrd.img --hub 10.0.0.1:7443 --ca ca.pem \
      --token abcdef.0123456789abcdef --network-profile bond.yaml --ssh-key ~/.ssh/id_ed25519.pub \
      --format raw -o enroll.img`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runEnroll(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.release, "release", "", "release bundle directory (from 'roost-image release')")
	fl.StringVar(&f.kernel, "kernel", "", "kernel file (instead of, or overriding, the bundle's)")
	fl.StringVar(&f.initrd, "initrd", "", "initrd file (instead of, or overriding, the bundle's)")
	fl.StringVar(&f.config, "config", "", "admin.conf with the hub endpoints and CA (default $ROOST_CONFIG or ~/.roost/config when --hub is not given)")
	fl.StringSliceVar(&f.hubs, "hub", nil, "hub API address host:port (repeatable; overrides the config's)")
	fl.StringVar(&f.ca, "ca", "", "hub CA certificate file, PEM (overrides the config's)")
	fl.StringVar(&f.token, "token", "", "enrollment token <id>.<secret>")
	fl.BoolVar(&f.createToken, "create-token", false, "create an enrollment token on the hub (needs an admin.conf)")
	fl.Int32Var(&f.maxUses, "max-uses", 0, "with --create-token: how many Servers may enroll (0: unlimited)")
	fl.StringVar(&f.pool, "pool", "", "with --create-token: pre-assign enrolled Servers to this Pool")
	fl.StringVar(&f.expires, "expires", "", "token expiry: a duration from now (72h) or a time (2026-12-01T00:00:00Z); with --create-token its TTL")
	fl.StringVar(&f.networkProfile, "network-profile", "", "NetworkProfile YAML applied while enrolling (bond/VLAN uplinks)")
	fl.StringArrayVar(&f.sshKeys, "ssh-key", nil, "authorized_keys file for the user core (repeatable)")
	fl.StringArrayVar(&f.releaseKeys, "release-key", nil, "ed25519 public key (.pub from roost-image keygen) the agent trusts to sign\nthe releases it installs (repeatable; without one the agent installs nothing)")
	fl.StringArrayVar(&f.userConfigs, "user-config", nil, "Ignition JSON or Container Linux Config YAML to merge (repeatable)")
	fl.StringVarP(&f.out, "output", "o", "", "output image file (required)")
	fl.StringVar(&f.format, "format", "iso", "image format: iso (BIOS+UEFI, CD/virtual media/USB) or raw (GPT disk, UEFI only)")
	fl.StringVar(&f.isolinux, "isolinux", "", "isolinux.bin (default: Debian package isolinux)")
	fl.StringVar(&f.isohybridMBR, "isohybrid-mbr", "", "isohdpfx.bin, the ISO's MBR boot code for USB sticks (default: Debian package isolinux)")
	fl.StringVar(&f.ldlinux, "ldlinux", "", "ldlinux.c32 (default: Debian package syslinux-common)")
	fl.StringVar(&f.grub, "grub-efi", "", "GRUB EFI image for BOOTX64.EFI (default: Debian package grub-efi-amd64-bin)")
	fl.StringArrayVar(&f.cmdline, "cmdline", nil, "extra kernel argument (repeatable)")
	fl.StringArrayVar(&f.extensions, "extension", nil, "system extension image (.raw from 'roost-image sysext') merged into the live OS,\ne.g. the roost-agent extension (repeatable)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// parseExpires reads --expires: a duration from t or an RFC 3339 time.
func parseExpires(s string, t time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return t.Add(d), nil
	}
	if at, err := time.Parse(time.RFC3339, s); err == nil {
		return at, nil
	}
	if at, err := time.Parse("2006-01-02", s); err == nil {
		return at, nil
	}
	return time.Time{}, usageErrorf("--expires %q: want a duration (72h) or a time (2026-12-01T00:00:00Z)", s)
}

// checkEnrollFlags checks the flags of enroll that need no file, at time t,
// and returns the token expiry. Every error is a usage error.
func checkEnrollFlags(f enrollFlags, t time.Time) (time.Time, error) {
	expires, err := parseExpires(f.expires, t)
	if err != nil {
		return time.Time{}, err
	}
	switch {
	case !expires.IsZero() && !expires.After(t):
		return time.Time{}, usageErrorf("--expires %s is in the past: the token would be expired", expires.UTC().Format(time.RFC3339))
	case f.token != "" && f.createToken:
		return time.Time{}, usageErrorf("give --token or --create-token, not both")
	case f.token == "" && !f.createToken:
		return time.Time{}, usageErrorf("no enrollment token: give --token or --create-token")
	case f.token != "" && !agentconfig.ValidToken(f.token):
		return time.Time{}, usageErrorf("--token: not an enrollment token (want abcdef.0123456789abcdef, from 'roostctl token create')")
	case !f.createToken && (f.maxUses != 0 || f.pool != ""):
		return time.Time{}, usageErrorf("--max-uses and --pool go with --create-token (a --token has its own)")
	case f.release == "" && (f.kernel == "" || f.initrd == ""):
		return time.Time{}, usageErrorf("no kernel and initrd: give a release bundle (--release) or --kernel and --initrd")
	}
	if format := iso.Format(f.format); format != iso.FormatISO && format != iso.FormatRaw {
		return time.Time{}, usageErrorf("--format %q: want iso or raw", f.format)
	}
	if len(f.hubs) > 0 {
		if err := agentconfig.ValidateHubs(f.hubs); err != nil {
			return time.Time{}, usageErrorf("--hub: %v", err)
		}
	}
	return expires, nil
}

func runEnroll(cmd *cobra.Command, f enrollFlags) error {
	t := now()
	expires, err := checkEnrollFlags(f, t)
	if err != nil {
		return err
	}
	var cfg *client.Config
	cfgPath := f.config
	if cfgPath == "" && (len(f.hubs) == 0 || f.ca == "" || f.createToken) {
		cfgPath = client.DefaultPath()
	}
	if cfgPath != "" {
		if cfg, err = client.LoadConfig(cfgPath); err != nil {
			if f.config == "" && errors.Is(err, os.ErrNotExist) {
				return usageErrorf("no hub endpoints: give --config admin.conf, or --hub and --ca (%v)", err)
			}
			return err
		}
	}
	hubs := f.hubs
	var ca []byte
	if cfg != nil {
		if len(hubs) == 0 {
			hubs = cfg.Hubs
		}
		ca = []byte(cfg.CertificateAuthority)
	}
	if f.ca != "" {
		if ca, err = os.ReadFile(f.ca); err != nil {
			return fmt.Errorf("hub CA: %w", err)
		}
	}
	readAll := func(what string, paths []string) ([][]byte, error) {
		var out [][]byte
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			out = append(out, data)
		}
		return out, nil
	}
	var profile []byte
	if f.networkProfile != "" {
		if profile, err = os.ReadFile(f.networkProfile); err != nil {
			return fmt.Errorf("network profile: %w", err)
		}
	}
	keys, err := readAll("SSH key", f.sshKeys)
	if err != nil {
		return err
	}
	releaseKeys, err := readAll("release key", f.releaseKeys)
	if err != nil {
		return err
	}
	for i, k := range releaseKeys {
		if _, err := agentconfig.ParseReleaseKey(string(k)); err != nil {
			return usageErrorf("--release-key %s: %v", f.releaseKeys[i], err)
		}
	}
	confs, err := readAll("user config", f.userConfigs)
	if err != nil {
		return err
	}
	format := iso.Format(f.format)
	o := imagebuilder.EnrollOptions{
		Release: f.release, Kernel: f.kernel, Initrd: f.initrd,
		Hubs: hubs, CA: ca, Token: f.token, TokenExpires: expires,
		NetworkProfile: profile, Format: format, Cmdline: f.cmdline, Now: t, Extensions: f.extensions,
		Loaders: iso.BootLoaders{Isolinux: f.isolinux, Ldlinux: f.ldlinux, IsohybridMBR: f.isohybridMBR, GrubEFI: f.grub},
	}
	for _, k := range keys {
		o.SSHKeys = append(o.SSHKeys, string(k))
	}
	for _, k := range releaseKeys {
		o.ReleaseKeys = append(o.ReleaseKeys, string(k))
	}
	for i, c := range confs {
		o.UserConfigs = append(o.UserConfigs, ignition.Snippet{Name: f.userConfigs[i], Data: c})
	}
	if f.createToken {
		// Check everything local first, so a bad input does not cost a token.
		if err := dryCheck(o); err != nil {
			return err
		}
		tok, exp, err := createToken(cmd.Context(), cfg, expires, t, f.maxUses, f.pool)
		if err != nil {
			return err
		}
		o.Token, o.TokenExpires = tok, exp
		fmt.Fprintf(cmd.ErrOrStderr(), "created enrollment token %s\n", imagebuilder.MaskToken(tok))
	}
	p := newProgress(cmd.ErrOrStderr(), f.quiet)
	o.Progress = p.Report
	err = imagebuilder.Enroll(o, f.out)
	p.Done()
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", f.out)
	return nil
}

// dryCheck validates the inputs that do not need the token.
func dryCheck(o imagebuilder.EnrollOptions) error {
	o.Token = "aaaaaa.aaaaaaaaaaaaaaaa"
	o.TokenExpires = time.Time{}
	return imagebuilder.Check(o)
}

// createToken asks the hub (at the admin.conf's addresses: --hub names the
// addresses baked into the image, which may differ) for an enrollment token.
func createToken(ctx context.Context, cfg *client.Config, expires, t time.Time, maxUses int32, pool string) (string, time.Time, error) {
	if cfg == nil {
		return "", time.Time{}, errors.New("--create-token needs an admin.conf (--config)")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, cfg, nil)
	if err != nil {
		return "", time.Time{}, err
	}
	defer conn.Close()
	req := &roostv1.CreateEnrollmentTokenRequest{MaxUses: maxUses, Pool: pool}
	if !expires.IsZero() {
		req.TtlSeconds = int64(expires.Sub(t).Seconds())
	}
	resp, err := roostv1.NewHubServiceClient(conn).CreateEnrollmentToken(ctx, req)
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return "", time.Time{}, errors.New("--create-token: not supported by this hub yet (create a token with roostctl and pass --token)")
		}
		return "", time.Time{}, fmt.Errorf("create enrollment token: %w", err)
	}
	var exp time.Time
	if et := resp.GetEnrollmentToken(); et != nil && et.GetSpec().GetExpiresAt() != nil {
		exp = et.GetSpec().GetExpiresAt().AsTime()
	}
	return resp.GetToken(), exp, nil
}

func newInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect IMAGE",
		Short: "Show an enrollment image (boot entries, files, release, config; secrets masked) or an extension (release fields, files, manifest)",
		Example: `  roost-image inspect enroll.iso
  roost-image inspect enroll.img
  roost-image inspect kubelet-v1.34.4.raw`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sysext.IsImage(args[0]) {
				return inspectSysext(cmd.OutOrStdout(), args[0])
			}
			t := now()
			r, err := imagebuilder.Inspect(args[0], t)
			if err != nil {
				return err
			}
			return r.Write(cmd.OutOrStdout(), t)
		},
	}
}

func newReleaseCmd() *cobra.Command {
	var def, out, key string
	var fetch bool
	cmd := &cobra.Command{
		Use:   "release --manifest images/NAME.yaml -o DIR",
		Short: "Build a signed release bundle (kernel, initrd, systemd-boot, release.json)",
		Long: `Build a release bundle from an image definition: copy the kernel, the initrd
and the systemd-boot EFI binary (Debian package systemd-boot-efi unless the
definition names another), and write release.json (version, component
versions, sha256 of every artifact) signed with an ed25519 key
(release.json.sig). Artifacts given by URL are downloaded only with --fetch.

The definition's version is 1–64 characters of lower-case letters, digits
and . + _ -, starting with a digit, ending with a letter or digit, with no
two of . + _ - in a row (2026.11.0, 2026.11.0-rc.1): the hub records the
release as "v" and the version with separators turned into "-"
(v2026-11-0). Its date is an RFC 3339 date and time (2026-11-01T00:00:00Z).
images/README.md describes the fields; images/flatcar-stable.yaml is a
template to fill in, and 'make testbed' (images/testbed/build.sh) writes
the testbed's definition and builds its bundle.`,
		Example: `  roost-image keygen -o _output/release
  # after filling in the version and digests of images/flatcar-stable.yaml
  roost-image release --manifest images/flatcar-stable.yaml --fetch --key _output/release.key -o _output/flatcar-stable`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := release.LoadDefinition(def)
			if err != nil {
				return err
			}
			o := release.Options{Fetch: fetch}
			if key != "" {
				if o.Key, err = release.LoadPrivateKey(key); err != nil {
					return err
				}
			}
			m, err := release.Build(d, out, o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "release %s %s in %s\n", m.Name, m.Version, out)
			for _, a := range m.Artifacts {
				fmt.Fprintf(w, "  %-10s %-22s %10d  sha256:%s\n", a.Name, a.File, a.Size, a.SHA256)
			}
			if m.KeyID != "" {
				fmt.Fprintf(w, "signed with key %s\n", m.KeyID)
			} else {
				fmt.Fprintf(w, "not signed (no --key)\n")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&def, "manifest", "", "image definition (images/NAME.yaml)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "bundle directory")
	cmd.Flags().StringVar(&key, "key", "", "ed25519 private key (from 'roost-image keygen') to sign release.json")
	cmd.Flags().BoolVar(&fetch, "fetch", false, "download artifacts given by URL (needs internet)")
	_ = cmd.MarkFlagRequired("manifest")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func newPublishCmd() *cobra.Command {
	var channel, keyFile string
	var extensions []string
	cmd := &cobra.Command{
		Use:   "publish DIR [BUNDLE...] [--extension RAW...]",
		Short: "Add signed release bundles and system extensions to a release feed directory that any web server can serve",
		Long: `Add release bundles (made by 'roost-image release --key KEY') to the release
feed rooted at DIR (created if missing): an index of channels, per channel the
list of its signed release manifests, and every artifact by its sha256
(docs/release-feeds.md). Serve DIR with any static web server, or copy it to an
air-gapped hub, and point a ReleaseFeed at it: the hub polls it, verifies each
release with its trusted keys and imports it onto the channel.

A release goes to --channel, or to the channel its definition names. Bundles
are checked first (signed, artifacts matching their sha256); a version the
feed holds with another manifest is refused, since releases are immutable.
Publishing a bundle again changes nothing. index.json is written last, so a
server never shows a channel naming a release not written yet.

--extension adds a signed system extension (NAME-VERSION.raw with its
.manifest.json and .sig beside it, from 'roost-image sysext --key KEY') to
--channel, or to the channels of the bundles given with it. The hub imports it
as an Extension; MachineClasses that follow the extension by name move to the
new version by reboot, inside their Pools' windows.`,
		Example: `  roost-image publish /srv/roost-feed _output/2026.12.0 --channel beta
  # then, on the hub
  roostctl apply -f - <<EOF
  apiVersion: roost.io/v1
  kind: ReleaseFeed
  metadata: {name: upstream}
  spec: {url: "https://releases.example.com/roost", channels: [beta]}
  EOF`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && len(extensions) == 0 {
				return usageErrorf("nothing to publish: give release bundle directories, --extension RAW, or both")
			}
			var pub ed25519.PublicKey
			if keyFile != "" {
				var err error
				if pub, err = release.LoadPublicKey(keyFile); err != nil {
					return usageErrorf("--key: %w", err)
				}
				for _, bd := range args[1:] {
					if _, err := release.Load(bd, pub); err != nil {
						return fmt.Errorf("%s: %w; nothing was published", bd, err)
					}
				}
			}
			var exts []feed.Extension
			for _, raw := range extensions {
				b, err := sysext.LoadBundle(raw, pub)
				if err != nil {
					return err
				}
				if !b.Signed {
					return fmt.Errorf("extension %s is not signed (no %s): sign it with roost-image sysext --key KEY; a hub imports only signed extensions",
						raw, filepath.Base(raw+sysext.SignatureSuffix))
				}
				m := b.Manifest
				exts = append(exts, feed.Extension{Raw: raw, Name: m.Name, Version: m.Version, SHA256: m.Image.SHA256, Size: m.Image.Size,
					Manifest: b.ManifestJSON, Signature: b.Signature})
			}
			done, err := feed.Publish(args[0], channel, args[1:], exts...)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, p := range done {
				what := "published"
				if !p.Added {
					what = "already published"
				}
				if p.Extension != "" {
					fmt.Fprintf(w, "extension %s %s %s on channel %s (%d new artifacts)\n", p.Extension, p.Version, what, p.Channel, p.Blobs)
					continue
				}
				fmt.Fprintf(w, "release %s %s on channel %s (%d new artifacts)\n", p.Version, what, p.Channel, p.Blobs)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&channel, "channel", "", "channel to list the releases on (default: the channel of each release's definition)")
	cmd.Flags().StringArrayVar(&extensions, "extension", nil, "signed system extension image `RAW` to publish (repeatable)")
	cmd.Flags().StringVar(&keyFile, "key", "", "ed25519 public key `PUBKEY_FILE` every bundle and extension must be signed with (checked before anything is written, as the hub will)")
	_ = cmd.MarkFlagFilename("key", "pub", "pem")
	_ = cmd.MarkFlagFilename("extension", "raw")
	return cmd
}

func newKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:     "keygen -o PREFIX",
		Short:   "Make an ed25519 key pair for signing releases (PREFIX.key, PREFIX.pub)",
		Example: `  roost-image keygen -o ~/.roost/release`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
				return err
			}
			pub, err := release.GenerateKey(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s.key and %s.pub (key id %s)\n", out, out, release.KeyID(pub))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "path prefix of the key files")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
