package cli

import (
	"fmt"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

func newHubCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Inspect and change the hub's members; save and restore its state",
		Long: `The hub is one or more roost-hub processes (members) that replicate the
fleet's state with Raft. One member is a fine start; three or five voters
keep the hub available when one or two fail.

These commands list the members, let a new member join, and remove one;
'hub snapshot' saves, inspects and restores the replicated state.`,
		Example: `  # Which members are there, and which one leads?
  roostctl hub members

  # Grow the hub: make a join token, then run the printed command on the new host
  roostctl hub join

  # Take a dead member out of the Raft configuration
  roostctl hub remove hub-3f2a9c01

  # Back up the state while the hub runs
  roostctl hub snapshot save hub.snap`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newHubMembersCommand(o), newHubJoinCommand(o), newHubJoinTokensCommand(o), newHubRemoveCommand(o), newHubSnapshotCommand(o))
	return cmd
}

// memberJSON is the -o json|yaml form of a member.
type memberJSON struct {
	ID          string `json:"id" yaml:"id"`
	RaftAddress string `json:"raftAddress" yaml:"raftAddress"`
	APIAddress  string `json:"apiAddress" yaml:"apiAddress"`
	Suffrage    string `json:"suffrage" yaml:"suffrage"`
	Leader      bool   `json:"leader" yaml:"leader"`
	// Version is the member's roost-hub version; RulesVersion the newest
	// apply rules it implements. Both are empty until the member reported.
	Version      string `json:"version,omitempty" yaml:"version,omitempty"`
	RulesVersion uint32 `json:"rulesVersion,omitempty" yaml:"rulesVersion,omitempty"`
	// Health is Healthy, Unhealthy or Unreachable as the answering member
	// sees it; HealthMessage says why when not Healthy.
	Health        string `json:"health,omitempty" yaml:"health,omitempty"`
	HealthMessage string `json:"healthMessage,omitempty" yaml:"healthMessage,omitempty"`
}

type membersJSON struct {
	Members []memberJSON `json:"members" yaml:"members"`
	Index   uint64       `json:"index" yaml:"index"`
	// RulesVersion is the apply rules version the hub uses: the lowest any
	// member implements.
	RulesVersion uint32 `json:"rulesVersion" yaml:"rulesVersion"`
}

func newHubMembersCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the hub's members and which one leads",
		Long: `List the hub's Raft members: their IDs, Raft and API addresses, suffrage
(Voter, Nonvoter, Staging), which one is the leader (LEADER column "*"),
whether each can serve as the answering member sees it (STATUS: Healthy,
Unhealthy or Unreachable, with the reason below the table; it asks each
member's gRPC health service, a second at most) and the roost-hub version
each runs (VERSION; "?" until the member reported it after starting).

A hub stays writable while a majority of its voters is up: 1 of 1, 2 of 3,
3 of 5. During a rolling upgrade VERSION shows which members still run the
old roost-hub; the hub applies commands with the rules of its oldest member
(-o json: rulesVersion) until every member runs the new one.`,
		Example: `  roostctl hub members

  # The member list for scripts
  roostctl hub members -o json`,
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
			resp, err := conn.hub.ListMembers(ctx, &roostv1.ListMembersRequest{})
			if err != nil {
				return o.wrapCallError(err)
			}
			if output != outTable {
				out := membersJSON{Members: []memberJSON{}, Index: resp.GetIndex(), RulesVersion: resp.GetRulesVersion()}
				for _, m := range resp.GetMembers() {
					out.Members = append(out.Members, memberJSON{ID: m.GetId(), RaftAddress: m.GetRaftAddress(), APIAddress: m.GetApiAddress(), Suffrage: m.GetSuffrage(), Leader: m.GetLeader(),
						Version: m.GetHubVersion(), RulesVersion: m.GetRulesVersion(), Health: m.GetHealth(), HealthMessage: m.GetHealthMessage()})
				}
				return writeStructured(o.Out, out, output)
			}
			return printMembers(o, resp.GetMembers())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outJSON, outYAML))
	return cmd
}

func printMembers(o *options, members []*roostv1.Member) error {
	tw := tabwriter.NewWriter(o.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tAPI ADDRESS\tSUFFRAGE\tLEADER\tSTATUS\tVERSION")
	var notes []string
	for _, m := range members {
		leader := ""
		if m.GetLeader() {
			leader = "*"
		}
		v := m.GetHubVersion()
		if v == "" {
			v = "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.GetId(), dash(m.GetRaftAddress()), dash(m.GetApiAddress()), dash(m.GetSuffrage()), leader, dash(m.GetHealth()), v)
		if msg := m.GetHealthMessage(); msg != "" {
			notes = append(notes, fmt.Sprintf("%s is %s: %s", m.GetId(), m.GetHealth(), msg))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintln(o.Out)
		for _, n := range notes {
			fmt.Fprintln(o.Out, n)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// joinJSON is the -o json|yaml form of a join token.
type joinJSON struct {
	ID           string   `json:"id" yaml:"id"`
	Token        string   `json:"token" yaml:"token"`
	ExpiresAt    string   `json:"expiresAt" yaml:"expiresAt"`
	APIAddresses []string `json:"apiAddresses" yaml:"apiAddresses"`
}

func newHubJoinCommand(o *options) *cobra.Command {
	var (
		ttl    time.Duration
		uses   int32
		output string
	)
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Make a token that lets a new member join the hub",
		Long: `Make a join token and print the command that starts a new member with it.

The token is a secret shown only once. It pins the hub's CA (the new member
trusts only this hub) and lets at most --uses members join until it expires
after --ttl (1s to 720h). 'roostctl hub join-tokens' lists and revokes
tokens. Run the printed roost-hub command on the new host, with an empty
--data-dir and addresses the other members can reach; the new member gets
its certificate, joins as a voter and replicates the state.

Add members one at a time and let each catch up ('roostctl hub members')
before adding the next; grow to three or five voters.`,
		Example: `  # A token for one member, valid for an hour
  roostctl hub join

  # A token for two more members, valid for a day, as JSON
  roostctl hub join --uses 2 --ttl 24h -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for the command line)", output)
			}
			if ttl < time.Second || ttl > resource.MaxJoinTokenTTL {
				return usageErrorf("--ttl %s: must be from 1s to %s (30 days)", window.FormatDuration(ttl), window.FormatDuration(resource.MaxJoinTokenTTL))
			}
			if uses < 1 {
				return usageErrorf("--uses %d: must be at least 1", uses)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{TtlSeconds: int64(ttl / time.Second), MaxUses: uses})
			if err != nil {
				return o.wrapCallError(err)
			}
			expires := resp.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)
			if output != "" {
				return writeStructured(o.Out, joinJSON{ID: resp.GetId(), Token: resp.GetToken(), ExpiresAt: expires, APIAddresses: nonNil(resp.GetApiAddresses())}, output)
			}
			fmt.Fprintf(o.Out, "Join token %s (secret, shown once; %s, expires %s; 'roostctl hub join-tokens revoke %s' revokes it):\n  %s\n\n",
				resp.GetId(), english.Count(int(uses), "use", "uses"), expires, resp.GetId(), resp.GetToken())
			raftPort := ""
			if members, err := conn.hub.ListMembers(ctx, &roostv1.ListMembersRequest{}); err == nil {
				raftPort = raftPortOf(members.GetMembers(), resp.GetApiAddresses())
			}
			fmt.Fprintf(o.Out, "On the new member's host, run (with addresses the other members can reach):\n  %s\n", joinCommandLine(resp.GetApiAddresses(), raftPort, resp.GetToken()))
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid, e.g. 30m, 24h; 1s to 720h (30 days)")
	f.Int32Var(&uses, "uses", 1, "how many members (`N`) may join with the token")
	f.StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml with token, expiresAt and apiAddresses\n(default: the token and a ready-to-run roost-hub command line)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}

// raftPortOf returns the Raft port of the member the join line points at
// (the first API address), so the new member can use the same ports.
func raftPortOf(members []*roostv1.Member, apiAddresses []string) string {
	if len(apiAddresses) == 0 {
		return ""
	}
	for _, m := range members {
		if m.GetApiAddress() == apiAddresses[0] {
			if _, p, err := net.SplitHostPort(m.GetRaftAddress()); err == nil {
				return p
			}
		}
	}
	return ""
}

// joinCommandLine is the roost-hub command a new member runs: it joins
// through the first API address, and uses the same ports as that member
// (roost-hub's defaults when unknown); HOST is for the user to fill in.
func joinCommandLine(apiAddresses []string, raftPort, token string) string {
	join := "HUB:7443"
	if len(apiAddresses) > 0 {
		join = apiAddresses[0]
	}
	port := "7443"
	if _, p, err := net.SplitHostPort(join); err == nil && p != "" {
		port = p
	}
	if raftPort == "" {
		raftPort = "7444"
	}
	return strings.Join([]string{
		"roost-hub", "--data-dir", "/var/lib/roost-hub",
		"--api-addr", "HOST:" + port, "--raft-addr", "HOST:" + raftPort, "--http-addr", "HOST:7480",
		"--join", join, "--join-token", token,
	}, " ")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func newHubRemoveCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a member from the hub",
		Long: `Remove a member from the Raft configuration by its ID (see 'roostctl hub
members'). Use it for a member that is gone for good, or before retiring a
host; stop its roost-hub process afterwards. Removing the leader makes the
others elect a new one.

Do not remove so many voters that the rest cannot form a majority.`,
		Example:           `  roostctl hub remove hub-3f2a9c01`,
		Args:              exactArgs(1, "the member ID"),
		ValidArgsFunction: o.argCompletions(false, memberIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if _, err := conn.hub.RemoveMember(ctx, &roostv1.RemoveMemberRequest{Id: args[0]}); err != nil {
				return o.wrapCallError(err)
			}
			fmt.Fprintf(o.Out, "member %s removed\n", args[0])
			return nil
		},
	}
}
