package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/version"
)

// versionJSON is the -o json|yaml form of version.
type versionJSON struct {
	Client clientVersionJSON `json:"client" yaml:"client"`
	Hub    *hubVersionJSON   `json:"hub,omitempty" yaml:"hub,omitempty"`
}

type clientVersionJSON struct {
	Version string `json:"version" yaml:"version"`
	Commit  string `json:"commit,omitempty" yaml:"commit,omitempty"`
}

type hubVersionJSON struct {
	Members int    `json:"members" yaml:"members"`
	Leader  string `json:"leader,omitempty" yaml:"leader,omitempty"`
	// Versions are the roost-hub versions the members reported, sorted;
	// more than one while a rolling upgrade is under way.
	Versions []string `json:"versions,omitempty" yaml:"versions,omitempty"`
	// Error says why the hub could not be asked.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
}

func newVersionCommand(o *options) *cobra.Command {
	var (
		clientOnly bool
		output     string
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print roostctl's version, and the hub's members if reachable",
		Long: `Print roostctl's version and commit. When the hub is reachable (see
--config and --hub), also print how many members it has, which leads and
the roost-hub versions they run (more than one during a rolling upgrade;
'roostctl hub members' says which member runs which); an unreachable hub
is reported but is not an error. --client skips the hub.`,
		Example: `  roostctl version
  roostctl version --client
  roostctl version -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml", output)
			}
			out := versionJSON{Client: clientVersionJSON{Version: version.Version, Commit: version.Commit()}}
			if !clientOnly {
				out.Hub = o.hubVersion(cmd)
			}
			if output != "" {
				return writeStructured(o.Out, out, output)
			}
			fmt.Fprintf(o.Out, "Client: roostctl %s", out.Client.Version)
			if out.Client.Commit != "" {
				fmt.Fprintf(o.Out, " (commit %s)", out.Client.Commit)
			}
			fmt.Fprintln(o.Out)
			if h := out.Hub; h != nil {
				switch {
				case h.Error != "":
					fmt.Fprintf(o.Out, "Hub:    not reachable: %s\n", h.Error)
				case h.Leader == "":
					fmt.Fprintf(o.Out, "Hub:    %s, no leader%s\n", english.Count(h.Members, "member", "members"), hubVersionsText(h.Versions))
				default:
					fmt.Fprintf(o.Out, "Hub:    %s, leader %s%s\n", english.Count(h.Members, "member", "members"), h.Leader, hubVersionsText(h.Versions))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the client version; do not contact the hub")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}

// hubVersion asks the hub for its members; failures are described, not
// returned.
func (o *options) hubVersion(cmd *cobra.Command) *hubVersionJSON {
	ctx, cancel := o.withTimeout(cmd.Context())
	defer cancel()
	conn, err := o.connect(ctx)
	if err != nil {
		return &hubVersionJSON{Error: oneLine(err.Error())}
	}
	defer conn.Close()
	resp, err := conn.hub.ListMembers(ctx, &roostv1.ListMembersRequest{})
	if err != nil {
		return &hubVersionJSON{Error: oneLine(err.Error())}
	}
	h := &hubVersionJSON{Members: len(resp.GetMembers())}
	for _, m := range resp.GetMembers() {
		if v := m.GetHubVersion(); v != "" && !slices.Contains(h.Versions, v) {
			h.Versions = append(h.Versions, v)
		}
		if m.GetLeader() {
			h.Leader = m.GetId()
			if m.GetApiAddress() != "" {
				h.Leader += " (" + m.GetApiAddress() + ")"
			}
		}
	}
	slices.Sort(h.Versions)
	return h
}

// hubVersionsText is ", roost-hub V" for the members' versions, marked as an
// upgrade under way when they differ; empty when none reported.
func hubVersionsText(versions []string) string {
	switch len(versions) {
	case 0:
		return ""
	case 1:
		return ", roost-hub " + versions[0]
	}
	return ", roost-hub " + strings.Join(versions, " and ") + " (members differ: upgrade under way?)"
}
