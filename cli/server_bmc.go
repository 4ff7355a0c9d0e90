package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// The BMC verbs of 'roostctl server': register, power, boot, provision.

func newServerRegisterCommand(o *options) *cobra.Command {
	var address, username, passwordFile, pool, output string
	var macs []string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "register NAME --bmc URL --bmc-username USER --bmc-password-file FILE",
		Short: "Record a server with its BMC before it ever booted, or set a server's BMC",
		Long: `Record a server the hub does not know yet, by the name you choose and its
baseboard management controller (BMC), so that 'roostctl server provision'
can enroll it with nobody at its console. It is listed in state Registered
until its agent enrolls; the enrolling server is matched to the record by
one of the MAC addresses given here (--mac) or by the system UUID its BMC
reports, and keeps the name.

On a server that exists (enrolled), register sets its BMC: address and
credentials; --mac and --pool are refused there (they come from its
enrollment).

The BMC address is the Redfish ComputerSystem that is the server:
redfish+https://HOST[:PORT]/redfish/v1/Systems/ID (redfish+http only for
tests and emulators). The password is read from a file (never a flag: it
would sit in the shell history and the process list). The credentials are
write-only: no read, log, event or audit record shows them; 'describe
server' says only whether they are set.`,
		Example: `  roostctl server register r12u7 --bmc redfish+https://10.20.0.17/redfish/v1/Systems/1 \
      --bmc-username roost --bmc-password-file bmc-pass.txt --mac 52:54:00:12:34:56 --pool workers
  roostctl server provision r12u7 --iso enroll.iso`,
		Args:              exactArgs(1, "a server NAME"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Server")),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCreateOutput(output); err != nil {
				return err
			}
			if address == "" || username == "" || passwordFile == "" {
				return usageErrorf("--bmc, --bmc-username and --bmc-password-file are required")
			}
			raw, err := os.ReadFile(passwordFile)
			if err != nil {
				return usageErrorf("--bmc-password-file: %v", err)
			}
			password := strings.TrimRight(string(raw), "\r\n")
			if password == "" {
				return usageErrorf("--bmc-password-file %s is empty", passwordFile)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var hdr metadata.MD
			resp, err := conn.hub.RegisterServer(ctx, &roostv1.RegisterServerRequest{Name: args[0], Macs: macs, Pool: pool,
				Bmc: &roostv1.BMC{Address: address, Username: username, Password: password, InsecureSkipVerify: insecure}}, grpc.Header(&hdr))
			if err != nil {
				return o.wrapCallError(err)
			}
			for _, w := range resp.GetWarnings() {
				fmt.Fprintf(o.Err, "Warning from hub: %s\n", w)
			}
			obj := &roostv1.Object{Kind: &roostv1.Object_Server{Server: resp.GetServer()}}
			switch output {
			case "":
				verb := "registered"
				if r := hdr.Get(resultHeader); len(r) > 0 && r[0] == "unchanged" {
					verb = "unchanged"
				} else if resp.GetServer().GetStatus().GetState() != "Registered" {
					verb = "configured (BMC set)"
				}
				fmt.Fprintf(o.Out, "server/%s %s\n", args[0], verb)
				return nil
			case outName:
				fmt.Fprintln(o.Out, objectRef(obj))
				return nil
			}
			b, err := encodeObjects([]*roostv1.Object{obj}, output, false)
			if err != nil {
				return err
			}
			_, err = o.Out.Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&address, "bmc", "", "the BMC's Redfish system: redfish+https://HOST[:PORT]/redfish/v1/Systems/ID (`URL`)")
	f.StringVar(&username, "bmc-username", "", "user name of the BMC account the hub uses (`USER`)")
	f.StringVar(&passwordFile, "bmc-password-file", "", "file holding the BMC account's password (one line; `FILE`)")
	f.BoolVar(&insecure, "insecure-skip-verify", false, "do not verify the BMC's TLS certificate (self-signed BMCs); the hub warns, since\nanyone on the management network could then read the BMC credentials")
	f.StringArrayVar(&macs, "mac", nil, "a permanent MAC address of the server, matched when it enrolls (repeatable; `MAC`)")
	f.StringVar(&pool, "pool", "", "pre-assign the new server to this Pool (`POOL`)")
	_ = cmd.RegisterFlagCompletionFunc("pool", o.flagCompletions(objectNames("Pool")))
	addCreateOutputFlag(cmd, &output)
	return cmd
}

func newServerPowerCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "power NAME on|off|cycle",
		Short: "Power a server on, off or cycle it through its BMC",
		Long: `Ask the hub to power a server on, off (at once: no graceful shutdown) or to
cycle its power (a hard reset), through its BMC (see 'roostctl server
register'). The request is recorded and the hub's leader carries it out;
the outcome is the server's BMCOperation condition and its POWER column
('roostctl get servers -o wide', 'roostctl describe server NAME').`,
		Example: `  roostctl server power r12u7 cycle
  roostctl describe server r12u7`,
		Args:              exactArgs(2, "a server NAME and on, off or cycle"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Server"), fixedValues("on", "off", "cycle")),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[1] {
			case "on", "off", "cycle":
			default:
				return usageErrorf("power %q: want on, off or cycle", args[1])
			}
			return o.updateServers(cmd, args[:1], "power "+args[1]+" requested",
				&roostv1.UpdateServerRequest{Action: roostv1.ServerAction_SERVER_ACTION_POWER, Power: args[1]})
		},
	}
}

func newServerBootCommand(o *options) *cobra.Command {
	var from string
	var once bool
	cmd := &cobra.Command{
		Use:   "boot NAME --from cd|pxe|disk --once",
		Short: "Make a server boot once from a device, through its BMC",
		Long: `Set a server's one-time boot override through its BMC: at its next boot
only, it boots from the virtual CD (cd), the network (pxe) or its first
disk (disk). --once is required: the hub sets no lasting boot order, so
that Roost's boot counting and fallback on the disk stay in charge. The
boot takes place at the next power on or cycle ('roostctl server power').`,
		Example: `  roostctl server boot r12u7 --from pxe --once
  roostctl server power r12u7 cycle`,
		Args:              exactArgs(1, "a server NAME"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Server")),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch from {
			case "cd", "pxe", "disk":
			default:
				return usageErrorf("--from %q: want cd, pxe or disk", from)
			}
			if !once {
				return usageErrorf("--once is required: the hub only sets one-time boot overrides")
			}
			return o.updateServers(cmd, args, "boot once from "+from+" requested",
				&roostv1.UpdateServerRequest{Action: roostv1.ServerAction_SERVER_ACTION_BOOT_ONCE, BootDevice: from})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the boot device: cd, pxe or disk (`DEVICE`)")
	cmd.Flags().BoolVar(&once, "once", false, "boot from it at the next boot only (required)")
	_ = cmd.RegisterFlagCompletionFunc("from", fixedCompletions("cd", "pxe", "disk"))
	return cmd
}

func newServerProvisionCommand(o *options) *cobra.Command {
	var iso string
	cmd := &cobra.Command{
		Use:   "provision NAME --iso FILE",
		Short: "Enroll a server with nobody at it: virtual media, boot once from CD, power on",
		Long: `Provision a server through its BMC: push the enrollment ISO to the hub,
then the hub's leader inserts it in the server's virtual CD drive, sets a
one-time boot from CD and powers the server on (or cycles it when it is
on). The BMC fetches the ISO from the hub over HTTPS (roost-hub
--media-addr) under a download token good for this server only and for
30 minutes. When the server's agent enrolls, the hub matches it to the
server (by MAC or the BMC's system UUID) and ejects the media.

The ISO is one made with 'roost-image enroll' (it holds an enrollment
token): the hub does not build ISOs itself (it holds no boot loaders);
one ISO can serve every server of a pool.

A step that fails (wrong password, a BMC error, no answer) ejects the
media again and sets the BMCOperation condition to False with the reason
(Unauthorized, ServerError, Timeout, …); see 'roostctl describe server'.`,
		Example: `  roost-image enroll --release ./release-2026.11.0 --config admin.conf --create-token --pool workers -o enroll.iso
  roostctl server provision r12u7 --iso enroll.iso
  roostctl get servers -o wide`,
		Args:              exactArgs(1, "a server NAME"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Server")),
		RunE: func(cmd *cobra.Command, args []string) error {
			if iso == "" {
				return usageErrorf("--iso is required: an enrollment ISO ('roost-image enroll')")
			}
			digest, size, err := fileSHA256(iso)
			if err != nil {
				return usageErrorf("--iso: %v", err)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := o.pushArtifact(ctx, conn, iso, release.Artifact{Name: filepath.Base(iso), File: iso, Size: size, SHA256: digest}, isTerminal(o.Err)); err != nil {
				done()
				return err
			}
			done()
			return o.updateServers(cmd, args, "provisioning requested",
				&roostv1.UpdateServerRequest{Action: roostv1.ServerAction_SERVER_ACTION_PROVISION, MediaDigest: digest})
		},
	}
	cmd.Flags().StringVar(&iso, "iso", "", "the enrollment ISO to boot the server from (`FILE`)")
	_ = cmd.MarkFlagFilename("iso", "iso")
	return cmd
}

// fileSHA256 is the hex sha256 and size of the file at path.
func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// fixedValues lists fixed values for argCompletions.
func fixedValues(values ...string) lister {
	return func(context.Context, roostv1.HubServiceClient, []string) ([]cobra.Completion, error) {
		return values, nil
	}
}
