package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// roostctl auth: who the hub thinks you are and what you may do.

func newAuthCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Show who you are to the hub and what you may do",
		Long: `The hub knows you by your client certificate: its CN is your name and its
role (admin, operator, viewer, auditor) decides which calls you may make
('roostctl user --help' lists the roles). 'whoami' shows the identity the
hub sees; 'can-i' asks the hub whether your role may do something.`,
		Example: `  roostctl auth whoami
  roostctl auth can-i pause rollout
  roostctl auth can-i create token`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newAuthWhoamiCommand(o), newAuthCanICommand(o))
	return cmd
}

// whoamiJSON is the -o json|yaml form of WhoAmI.
type whoamiJSON struct {
	Name     string `json:"name" yaml:"name"`
	Role     string `json:"role" yaml:"role"`
	Serial   string `json:"serial,omitempty" yaml:"serial,omitempty"`
	NotAfter string `json:"notAfter,omitempty" yaml:"notAfter,omitempty"`
}

func newAuthWhoamiCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Print your name, role and certificate as the hub sees them",
		Long: `Print the name (certificate CN), role and certificate serial and expiry
that the hub member you reach sees for your client configuration.`,
		Example: `  roostctl auth whoami
  roostctl auth whoami -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for text)", output)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.WhoAmI(ctx, &roostv1.WhoAmIRequest{})
			if err != nil {
				return o.wrapCallError(err)
			}
			j := whoamiJSON{Name: resp.GetName(), Role: resp.GetRole(), Serial: resp.GetSerial()}
			if resp.GetNotAfter() != nil {
				j.NotAfter = resp.GetNotAfter().AsTime().UTC().Format(time.RFC3339)
			}
			if output != "" {
				return writeStructured(o.Out, j, output)
			}
			fmt.Fprintf(o.Out, "Name:     %s\nRole:     %s\nSerial:   %s\nExpires:  %s\n", j.Name, j.Role, orNone(j.Serial), orNone(j.NotAfter))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}

// canIVerbs are the verbs can-i completes.
var canIVerbs = []string{"get", "list", "watch", "apply", "create", "update", "delete", "assign", "unassign", "cordon", "uncordon",
	"approve", "deny", "label", "pause", "resume", "abort", "undo", "pin", "promote", "push", "trust", "untrust", "revoke", "renew",
	"remove", "save", "restore"}

// canIAreas are the kinds can-i knows besides object kinds.
var canIAreas = []string{"member", "jointoken", "token", "snapshot", "artifact", "imagerelease", "releasekey", "rollout", "user"}

func newAuthCanICommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "can-i VERB KIND",
		Short: "Ask the hub whether your role may do VERB on KIND",
		Long: `Ask the hub whether your role may do VERB on KIND. KIND is an object kind
(pool, server, machineclass, …) or one of member, jointoken, token,
snapshot, artifact, imagerelease, releasekey, rollout, user. The hub answers
from the same table it authorizes every call with. Prints "yes" (exit code
0) or "no" with the role needed (exit code 1).`,
		Example: `  roostctl auth can-i assign server
  roostctl auth can-i pause rollout
  roostctl auth can-i create user`,
		Args: exactArgs(2, "a VERB and a KIND"),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return canIVerbs, cobra.ShellCompDirectiveNoFileComp
			case 1:
				kinds := append([]string(nil), canIAreas...)
				for _, k := range resource.Kinds() {
					kinds = append(kinds, k.Singular)
				}
				return kinds, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for text)", output)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.AuthCheck(ctx, &roostv1.AuthCheckRequest{Verb: args[0], Kind: args[1]})
			if err != nil {
				return o.wrapCallError(err)
			}
			if output != "" {
				if err := writeStructured(o.Out, map[string]any{"allowed": resp.GetAllowed(), "reason": resp.GetReason(), "methods": resp.GetMethods()}, output); err != nil {
					return err
				}
			} else if resp.GetAllowed() {
				fmt.Fprintln(o.Out, "yes")
			} else {
				fmt.Fprintf(o.Out, "no: %s\n", strings.TrimSpace(resp.GetReason()))
			}
			if !resp.GetAllowed() {
				return reportedError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}
