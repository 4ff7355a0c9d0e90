package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func newPoolCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pool",
		Aliases: []string{"pools", "pl"},
		Short:   "Assign servers to pools and release them",
		Long: `A Pool groups Machines that share a spec: the workers of one Cluster, or
standalone hosts when it names no Cluster. Its members
are claims on Servers, called Machines: each assigned Server gets one
Machine, which goes Requested → Scheduled → Provisioned → Joined → Ready.

A Pool gets its Servers in one of two ways:

  replicas: N   the hub claims N Available Servers that match the pool's
                MachineClass server selector (in name order), and releases
                the newest Machines when N shrinks
  no replicas   explicit membership: an operator assigns Servers with
                'roostctl pool assign' and releases them with 'pool unassign'

A Server can be claimed only while it is Available, not cordoned and not
Unreachable, and only by one Machine at a time. Create and change pools
with 'roostctl apply -f pool.yaml'; list their Machines with
'roostctl get machines'.`,
		Example: `  roostctl pool assign workers 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl pool unassign workers 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl get machines`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPoolAssignCommand(o), newPoolUnassignCommand(o), newPoolPinCommand(o), newPoolUnpinCommand(o))
	return cmd
}

func newPoolAssignCommand(o *options) *cobra.Command {
	var hostname, output string
	cmd := &cobra.Command{
		Use:   "assign POOL SERVER...",
		Short: "Claim servers for a pool: one Machine each",
		Long: `Assign servers to a pool without replicas: the hub creates one Machine per
server (named POOL-xxxxx), the server becomes Claimed, and the Machine is
Scheduled. All or nothing: if one server cannot be claimed (not Available,
cordoned, Unreachable, already claimed, pre-assigned to another pool, or
not matching the pool's MachineClass server selector), none is, and the
hub says why for each.

The hub then renders the server's Revision (image, host name, labels,
network profile, cluster join) and the agent installs it and reboots into
it; follow it with roostctl get machines -w.

Pools with replicas choose their servers themselves and refuse assign;
change replicas instead.`,
		Example: `  roostctl pool assign workers 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl pool assign demo 4c4c4544-0042-3510-8052-b4c04f4d4e31 --hostname demo-1
  roostctl pool assign workers $(roostctl get servers -l rack=r12 -o name)`,
		Args:              minArgs(2, "a POOL and at least one SERVER"),
		ValidArgsFunction: o.argCompletions(true, objectNames("Pool"), objectNames("Server")),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCreateOutput(output); err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: args[0], Servers: serverNames(args[1:]), Hostname: hostname})
			if err != nil {
				return o.wrapCallError(err)
			}
			if output != "" {
				var objs []*roostv1.Object
				for _, m := range resp.GetMachines() {
					objs = append(objs, resource.Wrap(m))
				}
				return o.printObjects(o.Out, objs, output, len(objs) != 1)
			}
			for _, m := range resp.GetMachines() {
				fmt.Fprintf(o.Out, "machine/%s created (server %s, pool %s)\n", m.GetMetadata().GetName(), m.GetSpec().GetServer(), m.GetSpec().GetPool())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&hostname, "hostname", "", "host name of the Machine (`NAME`, an RFC 1123 DNS name, unique in the pool;\nonly with one SERVER; default: the Machine's name)")
	addCreateOutputFlag(cmd, &output)
	return cmd
}

func newPoolUnassignCommand(o *options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "unassign POOL SERVER...",
		Short: "Release servers from a pool: their Machines are destroyed",
		Long: `Release servers from a pool: each server's Machine is Destroyed and
removed, and the server becomes Available again. All or nothing: every
server must be claimed by a Machine of POOL.

Workers of a Cluster are cordoned and drained first, as for a reboot (pods
evicted through the Eviction API, PodDisruptionBudgets honoured, at most the
Cluster's drainTimeout); the command waits for that. When a drain fails,
nothing is released and the Nodes are schedulable again. --force releases
at once, without draining. Machines of a pool without a Cluster, and workers
whose Node never registered, need no drain and are released at once.
Unless --timeout is given, roostctl waits as long as the drains may take.

In a pool with replicas the hub claims a replacement; cordon the server
first ('roostctl server cordon') to keep it from being claimed again.`,
		Example: `  roostctl pool unassign workers 4c4c4544-0042-3510-8052-b4c04f4d4e31

  # Release without draining the Node (its pods stop with the host)
  roostctl pool unassign workers 4c4c4544-0042-3510-8052-b4c04f4d4e31 --force`,
		Args:              minArgs(2, "a POOL and at least one SERVER"),
		ValidArgsFunction: o.argCompletions(true, objectNames("Pool"), poolServers),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, conn, done, err := o.openRelease(cmd, force)
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: args[0], Servers: serverNames(args[1:]), Force: force})
			if err != nil {
				return o.wrapCallError(err)
			}
			for _, m := range resp.GetMachines() {
				fmt.Fprintf(o.Out, "machine/%s deleted\n", m)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, forceFlagHelp)
	return cmd
}

// serverNames accepts "NAME" and "server/NAME" (the -o name form).
func serverNames(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = trimKindPrefix(a, "server/", "servers/", "srv/")
	}
	return out
}

func trimKindPrefix(s string, prefixes ...string) string {
	for _, p := range prefixes {
		if len(s) > len(p) && s[:len(p)] == p {
			return s[len(p):]
		}
	}
	return s
}
