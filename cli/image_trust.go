package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

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
