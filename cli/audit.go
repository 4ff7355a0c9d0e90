package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// roostctl audit: the audit log of the hub member roostctl reaches.

// auditEntry is one audit log line (the hub's api.AuditEntry, which
// roostctl does not link).
type auditEntry struct {
	Time      time.Time `json:"time" yaml:"time"`
	Member    string    `json:"member" yaml:"member"`
	Caller    string    `json:"caller" yaml:"caller"`
	Role      string    `json:"role" yaml:"role"`
	Source    string    `json:"source,omitempty" yaml:"source,omitempty"`
	Method    string    `json:"method" yaml:"method"`
	Kind      string    `json:"kind,omitempty" yaml:"kind,omitempty"`
	Name      string    `json:"name,omitempty" yaml:"name,omitempty"`
	RequestID string    `json:"requestId,omitempty" yaml:"requestId,omitempty"`
	Code      string    `json:"code" yaml:"code"`
	Message   string    `json:"message,omitempty" yaml:"message,omitempty"`
}

func newAuditCommand(o *options) *cobra.Command {
	var since time.Duration
	var user, kind, output string
	var limit int
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show who changed what on the hub, and who read secrets",
		Long: `Show the audit log of the hub member roostctl reaches (pick one with --hub):
every call of a person that changes something or reads a secret (a snapshot),
also refused ones, with TIME, CALLER, ROLE, the METHOD, the KIND and NAME
the request names, and the outcome (CODE). Each member records the calls it
received, once, also those it forwarded to the leader; so to see every call,
read the log of every member ('roostctl hub members' lists them). The log is
DATA_DIR/audit/audit.log on each member (JSON lines), rotated at 100 MB with
9 old files kept. Only admins and auditors may read it.`,
		Example: `  roostctl audit --since 24h
  roostctl audit --user jane --kind pool
  roostctl audit --hub 10.0.0.2:7443 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkTableOutput(output); err != nil {
				return err
			}
			if since < 0 || limit < 0 {
				return usageErrorf("--since and --limit must not be negative")
			}
			req := &roostv1.ReadAuditRequest{User: user, Kind: kind, Limit: int32(limit)}
			if since > 0 {
				req.Since = timestamppb.New(o.now().Add(-since))
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.ReadAudit(ctx, req)
			if err != nil {
				return o.wrapCallError(err)
			}
			entries := []auditEntry{}
			for _, line := range resp.GetEntries() {
				var e auditEntry
				if err := json.Unmarshal([]byte(line), &e); err == nil {
					entries = append(entries, e)
				}
			}
			if output == outJSON || output == outYAML {
				return writeStructured(o.Out, entries, output)
			}
			if len(entries) == 0 {
				fmt.Fprintf(o.Err, "No audit entries on member %s.\n", resp.GetMember())
				return nil
			}
			tw := tabwriter.NewWriter(o.Out, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "TIME\tCALLER\tROLE\tMETHOD\tKIND\tNAME\tCODE")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), orNone(tableCell(e.Caller)), orNone(e.Role),
					e.Method[strings.LastIndex(e.Method, "/")+1:], orNone(tableCell(e.Kind)), orNone(tableCell(e.Name)), e.Code)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().DurationVar(&since, "since", 0, "show only entries newer than this `DURATION` (e.g. 24h; default: all kept)")
	cmd.Flags().StringVar(&user, "user", "", "show only the calls of the user `NAME` (certificate CN)")
	cmd.Flags().StringVar(&kind, "kind", "", "show only calls on `KIND` (pool, server, token, user, …)")
	cmd.Flags().IntVar(&limit, "limit", 0, "show at most the newest `N` entries (default 1000)")
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outJSON, outYAML))
	_ = cmd.RegisterFlagCompletionFunc("user", o.flagCompletions(userNames))
	return cmd
}
