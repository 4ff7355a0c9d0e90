package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const netprofilePlanExample = `  # What would the agent do on this server to apply the profile lacp-vlan100?
  roostctl netprofile plan lacp-vlan100 --server 4c4c4544-0042-3510-8052-b4c04f4d4e31

  # The same for a profile not applied yet, read from a manifest
  roostctl netprofile plan lacp-vlan100 -f profile.yaml --server 4c4c4544-0042-3510-8052-b4c04f4d4e31`

func newNetprofileCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "netprofile",
		Aliases: []string{"np"},
		Short:   "Preview how a NetworkProfile applies to a server",
		Long: `Work with NetworkProfiles beyond apply/get: 'plan' prints the actions the
agent of a server would take to apply a profile, from the server's reported
inventory, without touching it.`,
		Example: netprofilePlanExample,
		Args:    cobra.NoArgs,
	}
	cmd.AddCommand(newNetprofilePlanCommand(o))
	return cmd
}

type netprofilePlanOptions struct {
	server string
	files  []string
	stale  bool
}

func newNetprofilePlanCommand(o *options) *cobra.Command {
	p := &netprofilePlanOptions{}
	cmd := &cobra.Command{
		Use:   "plan PROFILE --server NAME",
		Short: "Print the actions the agent would take to apply a NetworkProfile",
		Long: `Print, like 'terraform plan', the ordered actions the agent of a server would
take to apply a NetworkProfile, computed from the inventory the server reported
(its physical NICs) without touching the server:

  + create bond bond0 (802.3ad, miimon 100)
  ~ set mtu 9000 on uplink0
  - delete bridge br-old

PROFILE is a NetworkProfile in the hub, or, with -f, one in a manifest (checked
as 'roostctl apply' would). The inventory has no MTUs, addresses or routes, so
the plan is the one of a first boot: every NIC is taken to have MTU 1500.
What cannot be applied (a NIC the profile matches is missing, …) is listed
after the plan and makes the command exit with code 1.`,
		Example:           netprofilePlanExample,
		Args:              exactArgs(1, "PROFILE"),
		ValidArgsFunction: o.argCompletions(false, objectNames("NetworkProfile")),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runNetprofilePlan(cmd, p, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.server, "server", "", "the `NAME` of the Server whose reported inventory to plan against (required)")
	f.StringSliceVarP(&p.files, "filename", "f", nil, "read PROFILE from manifest `FILES` (a file, a directory, or - for standard input)\ninstead of the hub")
	f.BoolVar(&p.stale, "stale", false, "read the reached member's local state without asking the leader (may lag)")
	_ = cmd.MarkFlagRequired("server")
	_ = cmd.RegisterFlagCompletionFunc("server", o.flagCompletions(objectNames("Server")))
	return cmd
}

func (o *options) runNetprofilePlan(cmd *cobra.Command, p *netprofilePlanOptions, name string) error {
	var profile *roostv1.NetworkProfile
	if len(p.files) > 0 {
		var err error
		if profile, err = o.profileFromFiles(p.files, name); err != nil {
			return err
		}
	}
	ctx, conn, done, err := o.open(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	if profile == nil {
		resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "NetworkProfile", Name: name, Consistency: consistency(p.stale)})
		if err != nil {
			return o.wrapCallError(err)
		}
		profile = resp.GetObject().GetNetworkProfile()
	}
	resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "Server", Name: p.server, Consistency: consistency(p.stale)})
	if err != nil {
		return o.wrapCallError(err)
	}
	inv := resp.GetObject().GetServer().GetStatus().GetInventory()
	if len(inv.GetNics()) == 0 {
		fmt.Fprintf(o.Err, "error: Server %q has not reported an inventory with NICs yet: nothing to plan against\n", p.server)
		return reportedError{ExitFailed}
	}
	actions, err := hostnet.PlanForInventory(profile.GetSpec(), inv, hostnet.WithProfile(name))
	if err != nil && !hostnet.IsPlanError(err) {
		return usageErrorf("%v", err)
	}
	writePlan(o.Out, name, p.server, actions)
	if err != nil {
		fmt.Fprintf(o.Err, "error: %v\n", err)
		return reportedError{ExitFailed}
	}
	return nil
}

// profileFromFiles reads, decodes and validates manifests as apply does,
// and returns the NetworkProfile called name among them.
func (o *options) profileFromFiles(files []string, name string) (*roostv1.NetworkProfile, error) {
	inputs, err := o.readInputs(files)
	if err != nil {
		return nil, err
	}
	ms, diags := decodeInputs(inputs, resource.ForApply())
	diags = append(diags, resource.ValidateManifests(ms)...)
	if len(diags) > 0 {
		sortDiagnostics(inputs, diags)
		o.printDiagnostics("invalid manifests ("+problems(len(diags))+")", diags)
		return nil, reportedError{ExitUsage}
	}
	for _, m := range ms {
		if np := m.Object.GetNetworkProfile(); np != nil && np.GetMetadata().GetName() == name {
			return np, nil
		}
	}
	return nil, usageErrorf("no NetworkProfile %q in %s", name, manifestSources(files))
}

func writePlan(w io.Writer, profile, server string, actions []hostnet.Action) {
	fmt.Fprintf(w, "NetworkProfile %q on Server %q (from its reported inventory):\n", profile, server)
	counts := map[hostnet.Op]int{}
	for _, a := range actions {
		fmt.Fprintf(w, "  %s\n", a)
		counts[a.Op]++
	}
	if len(actions) == 0 {
		fmt.Fprintln(w, "  no changes: the server matches the profile")
	}
	fmt.Fprintf(w, "Plan: %d to add, %d to change, %d to delete.\n", counts[hostnet.OpCreate], counts[hostnet.OpChange], counts[hostnet.OpDelete])
}
