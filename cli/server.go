package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/util/validation"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func newServerCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "server",
		Aliases: []string{"servers", "srv"},
		Short:   "Approve, deny, label, cordon, clean, decommission, register, power and provision servers; read their logs",
		Long: `Servers register themselves by enrolling (see 'roostctl token'). These
commands change what the hub does with them:

  approve       let a server held in PendingApproval become Available
  deny          refuse a server: it becomes Decommissioned and its agent is refused
  label         set or remove operator labels (derived roost.io/ labels are
                computed from the inventory and cannot be changed)
  cordon        keep the hub from claiming the server for new Machines
  uncordon      undo cordon
  clean         have the agent wipe the server's disks again (after a failed
                cleaning: CleaningFailed)
  decommission  take the server out of service: its agent wipes its disks,
                then it is Decommissioned (a server with a BMC is powered
                off) and its agent refused until it enrolls again with a
                token
  register      record a server with its BMC before it ever booted, or set
                the BMC of a server
  power         power a server on, off or cycle it through its BMC
  boot          make a server boot once from cd, pxe or disk
  provision     enroll a server through its BMC: virtual media, boot once
                from CD, power on
  logs          show the server's systemd journal (this boot or earlier ones)
  bundle        save a support bundle (journal, boot entries, network, ...)

A server released by its Machine (pool unassign, a pool scaling down, a
Machine deleted) is Cleaning: its agent wipes its disks as its MachineClass's
spec.cleaning says, and the server is Available only once the agent reports
success; a failure leaves it CleaningFailed with the reason, retried by the
hub with backoff (1 min, doubling, at most 1 h) or at once with 'server clean'.

A command that finds a server as asked already changes nothing and says so
(e.g. "server/NAME already cordoned"), with exit code 0. To forget a server
for good, decommission (or deny) it first, then 'roostctl delete server
NAME' once the machine is off: an agent that still runs with a valid
certificate records its server again, PendingApproval.

List servers with 'roostctl get servers' and look at one with
'roostctl describe server NAME'.`,
		Example: `  roostctl server approve 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl server label 4c4c4544-0042-3510-8052-b4c04f4d4e31 rack=r12 gpu-
  roostctl server cordon 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl server clean 4c4c4544-0042-3510-8052-b4c04f4d4e31
  roostctl server decommission 4c4c4544-0042-3510-8052-b4c04f4d4e31 --reason "failed PSU"
  roostctl server logs 4c4c4544-0042-3510-8052-b4c04f4d4e31 --boot -1 -u kubelet`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	simple := func(use, short, long, verb string, action roostv1.ServerAction, withReason bool) *cobra.Command {
		var reason string
		example := "  roostctl server " + use + " 4c4c4544-0042-3510-8052-b4c04f4d4e31"
		if withReason {
			example += ` --reason "failed PSU"`
		}
		c := &cobra.Command{
			Use:               use + " NAME...",
			Short:             short,
			Long:              long,
			Example:           example,
			Args:              minArgs(1, "a server NAME"),
			ValidArgsFunction: o.argCompletions(true, objectNames("Server")),
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.updateServers(cmd, args, verb, &roostv1.UpdateServerRequest{Action: action, Reason: reason})
			},
		}
		if withReason {
			c.Flags().StringVar(&reason, "reason", "", "why, recorded in the server's status (`TEXT`)")
		}
		return c
	}
	cmd.AddCommand(
		simple("approve", "Let servers held for approval become Available",
			`Approve servers that enrolled with a token made with --require-approval
(state PendingApproval). They become Available. Approving a server that is
still Enrolling records the approval for when its agent connects. A server
that awaits no approval (its token did not require one, or it is approved
already) is left as it is: "server/NAME unchanged: …".`, "approved", roostv1.ServerAction_SERVER_ACTION_APPROVE, false),
		simple("deny", "Refuse servers: Decommissioned, agent refused",
			`Deny servers, typically ones held in PendingApproval that should not be
in the fleet. They become Decommissioned with the reason given; their agents
are refused from then on. A server claimed by a Machine must be released
first: the refusal names the Machine and the command that releases it.`, "denied", roostv1.ServerAction_SERVER_ACTION_DENY, true),
		simple("cordon", "Keep the hub from claiming servers for new Machines",
			`Cordon servers: set spec.unschedulable, so the hub claims them for no new
Machine. Machines already on them stay.`, "cordoned", roostv1.ServerAction_SERVER_ACTION_CORDON, false),
		simple("uncordon", "Let the hub claim servers again",
			`Uncordon servers: clear spec.unschedulable.`, "uncordoned", roostv1.ServerAction_SERVER_ACTION_UNCORDON, false),
		simple("clean", "Have the agent wipe servers' disks again",
			`Start a new cleaning of servers that no Machine claims: the hub asks each
one's agent to wipe its disks again, by the mode of its last cleaning
(the MachineClass's spec.cleaning when it was released; metadata when it
never was). The server is Cleaning until the agent reports, then Available
(or Decommissioned, when a decommission waits for the cleaning), or
CleaningFailed with the reason. Use it after fixing what made a cleaning
fail (the hub also retries by itself with backoff); 'roostctl get servers'
shows the state and reason, 'roostctl describe server NAME' the Cleaned
condition and what each disk held. A Claimed server is refused: release it
and the release cleans it.`, "cleaning", roostv1.ServerAction_SERVER_ACTION_CLEAN, false),
		simple("decommission", "Take servers out of service",
			`Decommission servers. An Available server is cleaned first (Cleaning: its
agent wipes its disks by its last cleaning's mode) and then becomes
Decommissioned; a server that cannot be cleaned (CleaningFailed, Unreachable,
or already Cleaning for a decommission) becomes Decommissioned at once, its
reason saying that its disks were not wiped. Its agent is refused from then
on. A server claimed by a Machine must be released first: the refusal names
the Machine and the command that releases it ('roostctl pool unassign POOL
NAME', or 'roostctl machine delete MACHINE' for a standalone one). To bring a
decommissioned server back, enroll it again with a token; to forget it,
'roostctl delete server NAME'.`, "decommissioned", roostv1.ServerAction_SERVER_ACTION_DECOMMISSION, true),
		newServerLabelCommand(o),
		newServerRegisterCommand(o),
		newServerPowerCommand(o),
		newServerBootCommand(o),
		newServerProvisionCommand(o),
		newServerLogsCommand(o),
		newServerBundleCommand(o),
	)
	return cmd
}

func (o *options) updateServers(cmd *cobra.Command, names []string, verb string, tmpl *roostv1.UpdateServerRequest) error {
	ctx, conn, done, err := o.open(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	// Like delete: a refused name does not stop the others; the exit code
	// is that of the first refusal.
	var failed error
	for _, name := range names {
		req := &roostv1.UpdateServerRequest{Name: name, Action: tmpl.Action, Reason: tmpl.Reason, SetLabels: tmpl.SetLabels, RemoveLabels: tmpl.RemoveLabels,
			Power: tmpl.Power, BootDevice: tmpl.BootDevice, MediaDigest: tmpl.MediaDigest}
		var hdr metadata.MD
		resp, err := conn.hub.UpdateServer(ctx, req, grpc.Header(&hdr))
		if err != nil {
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
		if r := hdr.Get(resultHeader); len(r) > 0 && r[0] == "unchanged" {
			fmt.Fprintf(o.Out, "server/%s %s\n", name, unchangedServer(req, resp.GetServer()))
			continue
		}
		fmt.Fprintf(o.Out, "server/%s %s\n", name, verb)
	}
	return failed
}

// resultHeader is the response header in which the hub says whether
// UpdateServer changed the Server ("configured") or found it as asked
// already ("unchanged"); see api.ResultHeader. Older hubs do not send it:
// roostctl then reports the change asked for.
const resultHeader = "roost-result"

// unchangedServer says, after the verb's place in "server/NAME …", why req
// changed nothing on srv (as the hub answered it), kubectl style: "already
// cordoned", "not labeled: …", "unchanged: …". The exit code stays 0.
func unchangedServer(req *roostv1.UpdateServerRequest, srv *roostv1.Server) string {
	st := srv.GetStatus()
	switch req.GetAction() {
	case roostv1.ServerAction_SERVER_ACTION_CORDON:
		return "already cordoned"
	case roostv1.ServerAction_SERVER_ACTION_UNCORDON:
		return "already uncordoned"
	case roostv1.ServerAction_SERVER_ACTION_APPROVE:
		for _, c := range st.GetConditions() {
			if c.GetType() == "Approved" && c.GetStatus() == "True" {
				return "unchanged: already approved (" + st.GetState() + ")"
			}
		}
		return "unchanged: nothing to approve, its enrollment token did not require approval (" + st.GetState() + ")"
	case roostv1.ServerAction_SERVER_ACTION_DENY:
		return "unchanged: already denied (" + st.GetStateReason() + ")"
	case roostv1.ServerAction_SERVER_ACTION_DECOMMISSION:
		return "unchanged: already Decommissioned (" + st.GetStateReason() + ")"
	case roostv1.ServerAction_SERVER_ACTION_LABEL:
		var why []string
		for _, k := range slices.Sorted(maps.Keys(req.GetSetLabels())) {
			why = append(why, k+"="+req.GetSetLabels()[k]+" is set already")
		}
		for _, k := range req.GetRemoveLabels() {
			why = append(why, k+" is not set")
		}
		return "not labeled: " + strings.Join(why, ", ")
	}
	return "unchanged"
}

func newServerLabelCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "label NAME KEY=VALUE... | KEY-...",
		Short: "Set or remove operator labels of a server",
		Long: `Set labels (KEY=VALUE) or remove them (KEY-) on a server, as kubectl label
does. Labels are what MachineClass server selectors match, next to the
labels the hub derives from the inventory (roost.io/cpus, roost.io/memory-gib,
roost.io/arch, roost.io/firmware, roost.io/disks, …), which cannot be set.`,
		Example: `  roostctl server label 4c4c4544-0042-3510-8052-b4c04f4d4e31 rack=r12 zone=a
  roostctl server label 4c4c4544-0042-3510-8052-b4c04f4d4e31 zone-`,
		Args:              minArgs(2, "a server NAME and labels"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Server")),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &roostv1.UpdateServerRequest{Action: roostv1.ServerAction_SERVER_ACTION_LABEL, SetLabels: map[string]string{}}
			seen := map[string]string{} // key -> the argument that named it
			for _, a := range args[1:] {
				if k, ok := strings.CutSuffix(a, "-"); ok && !strings.Contains(a, "=") {
					if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
						return usageErrorf("%q: invalid label key: %s", a, msgs[0])
					}
					if prev, dup := seen[k]; dup && prev != a {
						return usageErrorf("label %q is named twice (%q and %q): set it or remove it, once", k, prev, a)
					} else if dup {
						continue
					}
					seen[k] = a
					req.RemoveLabels = append(req.RemoveLabels, k)
					continue
				}
				m, err := parseLabelFlags("label", []string{a})
				if err != nil {
					return err
				}
				for k, v := range m {
					if prev, dup := seen[k]; dup && prev != a {
						return usageErrorf("label %q is named twice (%q and %q): set it or remove it, once", k, prev, a)
					}
					seen[k] = a
					req.SetLabels[k] = v
				}
			}
			return o.updateServers(cmd, args[:1], "labeled", req)
		},
	}
}
