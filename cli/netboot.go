package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

func newNetbootCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "netboot",
		Short: "Enroll servers that boot from the network (iPXE)",
		Long: `Servers with an empty disk and no CD can enroll by booting from the
network: a site DHCP server (or a UEFI HTTP boot entry, or an iPXE USB
stick) points them at a boot URL of the hub, which serves an iPXE script,
the enrollment kernel and initrd of an ImageRelease and a config initrd
with an enrollment token, over plain HTTP on roost-hub --boot-addr.

'roostctl netboot url' makes the enrollment token and its boot URL. The
URL is the only secret and expires with the token; revoking the token
('roostctl token revoke') stops the URL. See docs/zero-touch.md for
dnsmasq and ISC dhcpd configurations.`,
		Example: `  roostctl netboot url --channel stable --token-ttl 24h --pool workers`,
		Args:    noArgs,
	}
	cmd.AddCommand(newNetbootURLCommand(o))
	return cmd
}

// netbootURLJSON is the -o json|yaml form of a new network boot URL.
type netbootURLJSON struct {
	URL             string            `json:"url" yaml:"url"`
	Token           string            `json:"tokenName" yaml:"tokenName"`
	ExpiresAt       string            `json:"expiresAt" yaml:"expiresAt"`
	Version         string            `json:"version,omitempty" yaml:"version,omitempty"`
	Channel         string            `json:"channel,omitempty" yaml:"channel,omitempty"`
	MaxUses         int32             `json:"maxUses" yaml:"maxUses"`
	Pool            string            `json:"pool,omitempty" yaml:"pool,omitempty"`
	ServerLabels    map[string]string `json:"serverLabels,omitempty" yaml:"serverLabels,omitempty"`
	RequireApproval bool              `json:"requireApproval" yaml:"requireApproval"`
}

func newNetbootURLCommand(o *options) *cobra.Command {
	var (
		ttl              time.Duration
		uses             int32
		version, channel string
		pool             string
		labels           []string
		approval         bool
		output           string
	)
	cmd := &cobra.Command{
		Use:   "url (--version VERSION | --channel CHANNEL)",
		Short: "Make a network boot URL and its enrollment token; print the URL once",
		Long: `Make an enrollment token for network boot and print the boot URL that
hands it out: http://BOOT-HOST:PORT/boot/GRANT/ipxe on the boot listener
of the hub member you call (roost-hub --boot-addr, --boot-url). Put the
URL in your DHCP server's boot file option for iPXE clients (see
docs/zero-touch.md), or chain it from an iPXE script.

The URL boots the kernel and initrd of the ImageRelease --version, or
of the newest release of --channel at each boot, with a config initrd
holding the token, the hub CA and the hub addresses. It is a secret
like the token (anyone with it can enroll a server) and both expire
after --token-ttl; 'roostctl token revoke NAME' stops it at once.
--uses, --pool, --label and --require-approval work as for
'roostctl token create'. The hub serves the URL without writing
anything: the token is made now, by this authenticated call.`,
		Example: `  roostctl netboot url --channel stable
  roostctl netboot url --version 2026.11.0 --token-ttl 4h --uses 10 --pool workers --require-approval
  roostctl netboot url --channel stable -o json | jq -r .url`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for text)", output)
			}
			if (version == "") == (channel == "") {
				return usageErrorf("give the release to boot: --version VERSION or --channel CHANNEL (one of them)")
			}
			if ttl < time.Second || ttl > resource.MaxEnrollmentTokenTTL {
				return usageErrorf("--token-ttl %s: must be from 1s to %s: a network boot URL always expires", window.FormatDuration(ttl), window.FormatDuration(resource.MaxEnrollmentTokenTTL))
			}
			if uses < 0 {
				return usageErrorf("--uses %d: must be ≥ 0 (0: unlimited)", uses)
			}
			lm, err := parseLabelFlags("--label", labels)
			if err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{
				TtlSeconds: int64(ttl / time.Second), MaxUses: uses, Pool: pool, ServerLabels: lm, RequireApproval: approval,
				Netboot: &roostv1.NetbootSelector{Version: version, Channel: channel}})
			if err != nil {
				return o.wrapCallError(err)
			}
			et := resp.GetEnrollmentToken()
			name := et.GetMetadata().GetName()
			expires := et.GetSpec().GetExpiresAt().AsTime().UTC().Format(time.RFC3339)
			if output != "" {
				return writeStructured(o.Out, netbootURLJSON{URL: resp.GetNetbootUrl(), Token: name, ExpiresAt: expires, Version: version, Channel: channel,
					MaxUses: uses, Pool: pool, ServerLabels: lm, RequireApproval: approval}, output)
			}
			boots := "release " + version
			if channel != "" {
				boots = "the newest release of channel " + channel
			}
			limit := "unlimited uses"
			if uses > 0 {
				limit = english.Count(int(uses), "use", "uses")
			}
			fmt.Fprintf(o.Out, "Network boot URL (a secret, shown once; boots %s; enrollment token %s, %s, expires %s):\n  %s\n",
				boots, name, limit, expires, resp.GetNetbootUrl())
			fmt.Fprintf(o.Out, "Chain it from your DHCP server (docs/zero-touch.md); stop it with 'roostctl token revoke %s'.\n", name)
			if pool != "" || approval {
				var extra []string
				if pool != "" {
					extra = append(extra, "pool "+pool)
				}
				if approval {
					extra = append(extra, "held for approval")
				}
				fmt.Fprintf(o.Out, "Servers enrolled with it get: %s\n", strings.Join(extra, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&version, "version", "", "boot the ImageRelease of this `VERSION` (e.g. 2026.11.0)")
	_ = cmd.RegisterFlagCompletionFunc("version", o.flagCompletions(releaseVersions))
	f.StringVar(&channel, "channel", "", "boot the newest ImageRelease of this `CHANNEL` at each boot (e.g. stable)")
	f.DurationVar(&ttl, "token-ttl", 24*time.Hour, "how long the URL and its token work, e.g. 4h or 168h (a week); from 1s to 87600h")
	f.Int32Var(&uses, "uses", 0, "how many servers (`N`) may enroll with it; 0 is unlimited")
	f.StringVar(&pool, "pool", "", "pre-assign enrolled servers to this `POOL`")
	_ = cmd.RegisterFlagCompletionFunc("pool", o.flagCompletions(objectNames("Pool")))
	f.StringArrayVar(&labels, "label", nil, "set this `KEY=VALUE` label on enrolled servers (repeatable)")
	f.BoolVar(&approval, "require-approval", false, "hold enrolled servers in PendingApproval until 'roostctl server approve'")
	f.StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml, with the URL as field \"url\"\n(default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}
