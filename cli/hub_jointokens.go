package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/roostfleet/roost/cli/printers"

	"github.com/spf13/cobra"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// joinTokenJSON is the -o json|yaml form of a join token (never its
// secret).
type joinTokenJSON struct {
	ID        string `json:"id" yaml:"id"`
	ExpiresAt string `json:"expiresAt,omitempty" yaml:"expiresAt,omitempty"`
	MaxUses   int32  `json:"maxUses" yaml:"maxUses"`
	Uses      int32  `json:"uses" yaml:"uses"`
	RevokedAt string `json:"revokedAt,omitempty" yaml:"revokedAt,omitempty"`
	// Status is Active, Expired, UsedUp or Revoked at the leader's clock.
	Status string `json:"status" yaml:"status"`
}

func newHubJoinTokensCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "join-tokens",
		Short: "List and revoke the tokens new hub members join with",
		Long: `Join tokens ('roostctl hub join') let a new roost-hub become a member of
the hub, with a certificate from the hub's CA. List them (never their
secrets: the hub keeps only hashes) and revoke those that may have leaked
or are no longer needed; members that already joined with a token stay.`,
		Example: `  roostctl hub join-tokens list
  roostctl hub join-tokens revoke 8f2580eb`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newHubJoinTokensListCommand(o), newHubJoinTokensRevokeCommand(o))
	return cmd
}

func newHubJoinTokensListCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List join tokens (never their secrets)",
		Long: `List join tokens: ID (the part of the token between "::" and the dot),
EXPIRES (time left), USES (used/allowed; ∞ for no limit) and STATUS (Active, Expired, UsedUp or Revoked,
at the leader's clock).`,
		Example: `  roostctl hub join-tokens list
  roostctl hub join-tokens list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkTableOutput(output); err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.ListJoinTokens(ctx, &roostv1.ListJoinTokensRequest{})
			if err != nil {
				return o.wrapCallError(err)
			}
			if output != outTable {
				out := struct {
					Tokens []joinTokenJSON `json:"tokens" yaml:"tokens"`
				}{Tokens: []joinTokenJSON{}}
				for _, t := range resp.GetTokens() {
					out.Tokens = append(out.Tokens, joinTokenJSON{ID: t.GetId(), ExpiresAt: rfc3339(t.GetExpiresAt().AsTime(), t.GetExpiresAt() != nil),
						MaxUses: t.GetMaxUses(), Uses: t.GetUses(), RevokedAt: rfc3339(t.GetRevokedAt().AsTime(), t.GetRevokedAt() != nil), Status: t.GetStatus()})
				}
				return writeStructured(o.Out, out, output)
			}
			if len(resp.GetTokens()) == 0 {
				fmt.Fprintln(o.Err, "No join tokens.")
				return nil
			}
			tw := tabwriter.NewWriter(o.Out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "ID\tEXPIRES\tUSES\tSTATUS")
			for _, t := range resp.GetTokens() {
				limit := "∞"
				if m := t.GetMaxUses(); m > 0 {
					limit = strconv.Itoa(int(m))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d/%s\t%s\n", t.GetId(), printers.UntilCell(t.GetExpiresAt(), o.now()), t.GetUses(), limit, t.GetStatus())
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outJSON, outYAML))
	return cmd
}

func newHubJoinTokensRevokeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID...",
		Short: "Stop join tokens from adding more hub members",
		Long: `Revoke join tokens by ID (as 'hub join-tokens list' shows; a whole token,
R1…::ID.SECRET, names its token too). A revoked token is refused from now on;
members that already joined with it stay. Revoking twice is not an error; an
unknown ID revokes nothing and fails (exit 1).`,
		Example:           `  roostctl hub join-tokens revoke 8f2580eb`,
		Args:              minArgs(1, "a join token ID"),
		ValidArgsFunction: o.argCompletions(true, activeJoinTokenIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := make([]string, 0, len(args))
			for _, a := range args {
				ids = append(ids, joinTokenID(a))
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.RevokeJoinTokens(ctx, &roostv1.RevokeJoinTokensRequest{Ids: ids})
			if err != nil {
				return o.wrapCallError(err)
			}
			for _, id := range resp.GetRevoked() {
				fmt.Fprintf(o.Out, "join token %s revoked\n", id)
			}
			for _, id := range resp.GetAlready() {
				fmt.Fprintf(o.Out, "join token %s was already revoked\n", id)
			}
			return nil
		},
	}
}

// joinTokenID returns the id of a join token given by id or whole
// ("R1<CA hash>::<id>.<secret>").
func joinTokenID(s string) string {
	if _, rest, ok := strings.Cut(s, "::"); ok {
		s = rest
	}
	id, _, _ := strings.Cut(s, ".")
	return id
}

// rfc3339 formats t in UTC, or "" when !set.
func rfc3339(t time.Time, set bool) string {
	if !set {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
