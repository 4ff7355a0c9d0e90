package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func newMachineCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "machine",
		Aliases: []string{"machines", "m"},
		Short:   "Create and delete standalone machines",
		Long: `A Machine is one claim on a Server. Pool Machines are made by
'roostctl pool assign' or by a pool's replicas; a standalone Machine belongs
to no pool and joins no cluster: the server is provisioned as a plain host.

Milestones, shown as the PHASE of 'roostctl get machines' and as conditions
with reasons by 'roostctl describe machine NAME':

  Requested    capacity asked for; no server bound yet
  Scheduled    a server is claimed
  Provisioned  the server booted the Machine's Revision
  Joined       the kubelet joined the cluster (standalone: right after Provisioned)
  Ready        every milestone holds
  Destroyed    the claim was released; the Machine is removed

Deleting a Machine releases its server, which becomes Available again.`,
		Example: `  roostctl machine create --server 4c4c4544-0042-3510-8052-b4c04f4d4e31 edge-1
  roostctl describe machine edge-1
  roostctl machine delete edge-1`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newMachineCreateCommand(o), newMachineDeleteCommand(o))
	return cmd
}

func newMachineCreateCommand(o *options) *cobra.Command {
	var server, hostname, class, profile, output string
	cmd := &cobra.Command{
		Use:   "create --server SERVER [NAME]",
		Short: "Claim a server for a standalone machine",
		Long: `Claim one server for a standalone Machine (no pool, no cluster). NAME
defaults to the server's name. The server must be Available, not cordoned,
not Unreachable, and not pre-assigned to a pool.

The hub renders the server's Revision from the newest ImageRelease, the
--class (SSH keys for the user core, kernel args, install disk hints) and
the --network-profile; the agent installs it and reboots into it. Joined
holds as soon as it is provisioned: the result is a host reachable over SSH
with the class's keys.`,
		Example: `  roostctl machine create --server 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl machine create --server 4c4c4544-0042-3510-8052-b4c04f4d4e31 edge-1 \
      --hostname edge-1.example.net --class edge --network-profile edge-bond`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("%q takes at most one NAME, got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" {
				return usageErrorf("--server is required: name the server to claim")
			}
			if err := checkCreateOutput(output); err != nil {
				return err
			}
			req := &roostv1.CreateMachineRequest{Server: trimKindPrefix(server, "server/", "servers/", "srv/"), Hostname: hostname,
				MachineClass: class, NetworkProfile: profile}
			if len(args) == 1 {
				req.Name = trimKindPrefix(args[0], "machine/", "machines/", "m/")
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.CreateMachine(ctx, req)
			if err != nil {
				return o.wrapCallError(err)
			}
			m := resp.GetMachine()
			if output != "" {
				return o.printObjects(o.Out, []*roostv1.Object{resource.Wrap(m)}, output, false)
			}
			fmt.Fprintf(o.Out, "machine/%s created (server %s, standalone)\n", m.GetMetadata().GetName(), m.GetSpec().GetServer())
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "the server to claim (`NAME`)")
	cmd.Flags().StringVar(&hostname, "hostname", "", "host name of the Machine (`NAME`, an RFC 1123 DNS name; default: the Machine's name)")
	cmd.Flags().StringVar(&class, "class", "", "MachineClass of the Machine (`NAME`: SSH keys, kernel args, install disk hints)")
	cmd.Flags().StringVar(&profile, "network-profile", "", "NetworkProfile of the Machine (`NAME`)")
	addCreateOutputFlag(cmd, &output)
	_ = cmd.MarkFlagRequired("server")
	_ = cmd.RegisterFlagCompletionFunc("server", o.flagCompletions(objectNames("Server")))
	_ = cmd.RegisterFlagCompletionFunc("class", o.flagCompletions(objectNames("MachineClass")))
	_ = cmd.RegisterFlagCompletionFunc("network-profile", o.flagCompletions(objectNames("NetworkProfile")))
	return cmd
}

func newMachineDeleteCommand(o *options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete machines, releasing their servers",
		Long: `Delete Machines: each becomes Destroyed and is removed, and its server
becomes Available again. Works for pool and standalone Machines alike (the
same as 'roostctl delete machine NAME'); a pool with replicas claims a
replacement.

A worker's Node is cordoned and drained first (see 'roostctl pool unassign
--help'); the command waits for that, and a Machine whose drain fails is not
deleted. --force deletes at once, without draining. Standalone Machines, and
workers whose Node never registered, are deleted at once.`,
		Example: `  roostctl machine delete edge-1
  roostctl machine delete workers-7x2k9 workers-b4mzq
  roostctl machine delete workers-7x2k9 --force`,
		Args:              minArgs(1, "a machine NAME"),
		ValidArgsFunction: o.argCompletions(true, objectNames("Machine")),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, conn, done, err := o.openRelease(cmd, force)
			if err != nil {
				return err
			}
			defer done()
			// Like delete: a refused name does not stop the others; the
			// exit code is that of the first refusal.
			var failed error
			for _, a := range args {
				name := trimKindPrefix(a, "machine/", "machines/", "m/")
				if _, err := conn.hub.Delete(ctx, &roostv1.DeleteRequest{Kind: "Machine", Name: name, Force: force}); err != nil {
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
				fmt.Fprintf(o.Out, "machine/%s deleted\n", name)
			}
			return failed
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, forceFlagHelp)
	return cmd
}
