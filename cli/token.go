package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	agentconfig "github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

func newTokenCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Create, list and revoke enrollment tokens",
		Long: `An enrollment token lets new Servers enroll: the agent on a freshly booted
server presents it once, with its hardware inventory and a key, and gets a
client certificate back. From then on the agent uses only its certificate;
the token is no longer needed.

A token has the kubeadm form "abcdef.0123456789abcdef": the first six
characters are its name (shown by 'token list'), the rest is the secret.
The hub stores only a hash; the secret is shown once, when it is created.
A token expires after --ttl, allows --uses enrollments, can pre-assign a
pool and labels, and can hold new servers until an operator approves them.`,
		Example: `  # A token for a rack of servers, valid one day, held for approval
  roostctl token create --ttl 24h --uses 40 --label rack=r12 --require-approval

  # Which tokens exist, and which still work?
  roostctl token list

  # Stop a leaked token (servers already enrolled with it are not affected)
  roostctl token revoke abcdef`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTokenCreateCommand(o), newTokenListCommand(o), newTokenRevokeCommand(o))
	return cmd
}

// tokenJSON is the -o json|yaml form of a new token.
type tokenJSON struct {
	Token           string            `json:"token" yaml:"token"`
	Name            string            `json:"name" yaml:"name"`
	ExpiresAt       string            `json:"expiresAt,omitempty" yaml:"expiresAt,omitempty"`
	MaxUses         int32             `json:"maxUses" yaml:"maxUses"`
	Pool            string            `json:"pool,omitempty" yaml:"pool,omitempty"`
	ServerLabels    map[string]string `json:"serverLabels,omitempty" yaml:"serverLabels,omitempty"`
	RequireApproval bool              `json:"requireApproval" yaml:"requireApproval"`
}

// parseLabelFlags parses repeated k=v flags.
func parseLabelFlags(flag string, kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageErrorf("%s %q: write key=value", flag, kv)
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, usageErrorf("%s %q: invalid key: %s", flag, kv, msgs[0])
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return nil, usageErrorf("%s %q: invalid value: %s", flag, kv, msgs[0])
		}
		if prev, dup := out[k]; dup && prev != v {
			return nil, usageErrorf("%s %q: key %q is already set to %q (give each key once)", flag, kv, k, prev)
		}
		out[k] = v
	}
	return out, nil
}

func newTokenCreateCommand(o *options) *cobra.Command {
	var (
		ttl      time.Duration
		uses     int32
		pool     string
		labels   []string
		approval bool
		output   string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make an enrollment token and print its secret once",
		Long: `Make an enrollment token and print it. The secret is shown only now; the
hub keeps just its hash. Bake it into an enrollment image, or pass it to
roost-agent with --token.

--ttl 0 makes a token that never expires; --uses 0 (the default) allows any
number of enrollments until it expires. --pool pre-assigns enrolled Servers
to a Pool (it must exist), --label sets labels on them, and
--require-approval holds them in PendingApproval until
'roostctl server approve'.`,
		Example: `  roostctl token create
  roostctl token create --ttl 1h --uses 3 --pool workers --label rack=r12
  roostctl token create -o json | jq -r .token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for text)", output)
			}
			if ttl < 0 || (ttl > 0 && ttl < time.Second) || ttl > resource.MaxEnrollmentTokenTTL {
				return usageErrorf("--ttl %s: must be 0 (never expires) or from 1s to %s (10 years)", window.FormatDuration(ttl), window.FormatDuration(resource.MaxEnrollmentTokenTTL))
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
				TtlSeconds: int64(ttl / time.Second), MaxUses: uses, Pool: pool, ServerLabels: lm, RequireApproval: approval})
			if err != nil {
				return o.wrapCallError(err)
			}
			et := resp.GetEnrollmentToken()
			expires := ""
			if e := et.GetSpec().GetExpiresAt(); e != nil {
				expires = e.AsTime().UTC().Format(time.RFC3339)
			}
			if output != "" {
				return writeStructured(o.Out, tokenJSON{Token: resp.GetToken(), Name: et.GetMetadata().GetName(), ExpiresAt: expires,
					MaxUses: uses, Pool: pool, ServerLabels: lm, RequireApproval: approval}, output)
			}
			limits := []string{}
			if uses > 0 {
				limits = append(limits, english.Count(int(uses), "use", "uses"))
			} else {
				limits = append(limits, "unlimited uses")
			}
			if expires != "" {
				limits = append(limits, "expires "+expires)
			} else {
				limits = append(limits, "never expires")
			}
			fmt.Fprintf(o.Out, "Enrollment token %s (secret, shown once; %s):\n  %s\n", et.GetMetadata().GetName(), strings.Join(limits, ", "), resp.GetToken())
			if pool != "" || len(lm) > 0 || approval {
				var extra []string
				if pool != "" {
					extra = append(extra, "pool "+pool)
				}
				keys := make([]string, 0, len(lm))
				for k := range lm {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					extra = append(extra, "label "+k+"="+lm[k])
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
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid, e.g. 1h or 168h (a week); 1s to 87600h (10 years), or 0: never expires")
	f.Int32Var(&uses, "uses", 0, "how many servers (`N`) may enroll with it; 0 is unlimited")
	f.StringVar(&pool, "pool", "", "pre-assign enrolled servers to this `POOL`")
	_ = cmd.RegisterFlagCompletionFunc("pool", o.flagCompletions(objectNames("Pool")))
	f.StringArrayVar(&labels, "label", nil, "set this `KEY=VALUE` label on enrolled servers (repeatable)")
	f.BoolVar(&approval, "require-approval", false, "hold enrolled servers in PendingApproval until 'roostctl server approve'")
	f.StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml, with the secret as field \"token\"\n(default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}

func newTokenListCommand(o *options) *cobra.Command {
	var output string
	var stale bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List enrollment tokens (never their secrets)",
		Long: `List enrollment tokens: NAME, EXPIRES, USES (used/allowed), POOL and STATE
(Active, Expired, UsedUp or Revoked). Secrets are never shown: the hub does
not have them. The same as 'roostctl get enrollmenttokens'.`,
		Example: `  roostctl token list
  roostctl token list -o wide`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runGet(cmd, &getOptions{output: output, stale: stale}, []string{"EnrollmentToken"})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, wide, json, yaml or name")
	cmd.Flags().BoolVar(&stale, "stale", false, "read the reached member's local state without asking the leader (may lag)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outWide, outJSON, outYAML, outName))
	return cmd
}

func newTokenRevokeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME...",
		Short: "Stop enrollment tokens from enrolling more servers",
		Long: `Revoke enrollment tokens by name (the six characters before the dot; a
whole token NAME.SECRET names its token too). A revoked token is refused from
now on; servers that already enrolled with it keep their certificates and stay
connected. Revoking twice is not an error.`,
		Example:           `  roostctl token revoke abcdef`,
		Args:              minArgs(1, "a token NAME"),
		ValidArgsFunction: o.argCompletions(true, activeTokenNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var failed error
			for _, name := range args {
				// A whole token (NAME.SECRET) names its token, as kubeadm
				// token delete accepts.
				if agentconfig.ValidToken(name) {
					name, _, _ = strings.Cut(name, ".")
				}
				if _, err := conn.hub.RevokeEnrollmentToken(ctx, &roostv1.RevokeEnrollmentTokenRequest{Name: name}); err != nil {
					err = o.wrapCallError(err)
					if !isHubError(err) {
						return err // unreachable: no point in trying the other names
					}
					printError(o.Err, err)
					if failed == nil {
						failed = reportedError{exitCode(err)}
					}
					continue
				}
				fmt.Fprintf(o.Out, "%s/%s revoked\n", resource.MustLookup("EnrollmentToken").Singular, name)
			}
			return failed
		},
	}
}
