package cli

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

func newRolloutCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer pools' moves to new releases",
		Long: `Each Pool follows an image channel (or is pinned to one version). When a
new release reaches the channel, the hub renders a new Revision for every
Machine, and the agents download it at once (pre-staging); the reboots
then happen pool by pool, inside the pool's maintenance windows:

  - a reboot starts only while one of the pool's windows is open (one
    that started may finish after the window closes);
  - at most rollout.maxUnavailable Machines are down at once, counting
    Machines down for any reason;
  - after a Machine came up, the pool settles for rollout.settle;
  - a Machine that came back on its old Revision, or was not Ready within
    rollout.readyTimeout, failed; more failures than rollout.failureBudget
    halt the pool until an operator resumes it. Other pools go on.

Workers of a Cluster are cordoned and drained before their reboot.`,
		Example: `  roostctl rollout status
  roostctl rollout pause workers
  roostctl rollout resume workers
  roostctl rollout undo workers
  roostctl pool pin workers 2026.11.0`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRolloutStatusCommand(o),
		newRolloutActionCommand(o, "pause", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, "Stop starting reboots in a pool",
			"Pause the pool's rollout: no new reboot starts; reboots already running\nfinish. 'rollout resume' continues. A halted pool stays halted: the pause\nis recorded, and 'rollout resume' lifts both.\n\nThe pause (spec.rollout.paused) survives 'roostctl apply' of the pool's\nmanifest when the manifest does not pause the pool (the hub warns that\nit kept the pause): only 'rollout resume' lifts it."),
		newRolloutActionCommand(o, "resume", roostv1.RolloutAction_ROLLOUT_ACTION_RESUME, "Continue a paused or halted rollout",
			"Resume the pool's rollout after a pause or a halt. The Machines that\nfailed are acknowledged: they are not retried (their Revision stays\nFailed until its inputs change), and they no longer count against the\nfailure budget."),
		newRolloutActionCommand(o, "abort", roostv1.RolloutAction_ROLLOUT_ACTION_ABORT, "Halt a pool's rollout where it is",
			"Halt the pool's rollout: no new reboot starts until 'rollout resume'.\nMachines already updated stay on the new release; 'rollout undo' moves\nthe pool back to the previous release."),
		newRolloutActionCommand(o, "undo", roostv1.RolloutAction_ROLLOUT_ACTION_UNDO, "Pin a pool to its previous release",
			"Pin the pool to the release it ran before the current rollout\n(status.rollout.previousVersion). The Machines move back under the same\nrules: windows, maxUnavailable, settle, failure budget. 'pool unpin'\nfollows the channel again."),
	)
	return cmd
}

func newRolloutActionCommand(o *options, verb string, action roostv1.RolloutAction, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:               verb + " POOL",
		Short:             short,
		Long:              long,
		Example:           fmt.Sprintf("  roostctl rollout %s workers", verb),
		Args:              exactArgs(1, "a POOL"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Pool")),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.rolloutControl(cmd, &roostv1.RolloutControlRequest{Pool: trimKindPrefix(args[0], "pool/", "pools/"), Action: action}, verb)
		},
	}
}

// rolloutControl sends req and prints the pool's rollout after it.
func (o *options) rolloutControl(cmd *cobra.Command, req *roostv1.RolloutControlRequest, verb string) error {
	ctx, conn, done, err := o.open(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	resp, err := conn.hub.RolloutControl(ctx, req)
	if err != nil {
		return o.wrapCallError(err)
	}
	if resp.GetUnchanged() {
		fmt.Fprintln(o.Out, rolloutUnchangedMessage(req.GetAction(), resp.GetPool()))
		return nil
	}
	fmt.Fprintln(o.Out, rolloutControlMessage(req.GetAction(), verb, resp.GetPool()))
	return nil
}

// rolloutUnchangedMessage says why action changed nothing on pool p.
func rolloutUnchangedMessage(action roostv1.RolloutAction, p *roostv1.Pool) string {
	name := p.GetMetadata().GetName()
	switch action {
	case roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE:
		return fmt.Sprintf("pool/%s was already paused", name)
	case roostv1.RolloutAction_ROLLOUT_ACTION_RESUME:
		return fmt.Sprintf("pool/%s was neither paused nor halted", name)
	case roostv1.RolloutAction_ROLLOUT_ACTION_ABORT:
		return fmt.Sprintf("pool/%s was already halted", name)
	case roostv1.RolloutAction_ROLLOUT_ACTION_UNPIN:
		return fmt.Sprintf("pool/%s was not pinned", name)
	}
	return fmt.Sprintf("pool/%s was already pinned to %s", name, p.GetSpec().GetImageVersion())
}

// rolloutHalted is the phase of a halted rollout (state.RolloutHalted; the
// CLI does not import the hub).
const rolloutHalted = "Halted"

// rolloutControlMessage says what holds for pool p after action (verb)
// succeeded. A pause of a halted pool is recorded (spec.rollout.paused)
// but the pool stays halted: the message says so, and that resume lifts
// both.
func rolloutControlMessage(action roostv1.RolloutAction, verb string, p *roostv1.Pool) string {
	name := p.GetMetadata().GetName()
	ro := p.GetStatus().GetRollout()
	if action == roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE && ro.GetPhase() == rolloutHalted {
		msg := fmt.Sprintf("pool/%s pause recorded; its rollout is halted and stays halted: no reboot starts until 'roostctl rollout resume %s', which lifts the halt and the pause", name, name)
		if r := ro.GetReason(); r != "" {
			msg += "\n  halted: " + r
		}
		return msg
	}
	msg := fmt.Sprintf("pool/%s %s", name, pastTense(verb))
	switch action {
	case roostv1.RolloutAction_ROLLOUT_ACTION_PIN, roostv1.RolloutAction_ROLLOUT_ACTION_UNDO:
		msg += " to " + p.GetSpec().GetImageVersion()
	}
	return msg
}

func pastTense(verb string) string {
	switch verb {
	case "pin":
		return "pinned"
	case "unpin":
		return "unpinned"
	case "undo":
		return "pinned back"
	case "abort":
		return "halted"
	}
	return strings.TrimSuffix(verb, "e") + "ed"
}

func newRolloutStatusCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status [POOL]",
		Short: "Show each pool's rollout: phase, progress, blocker, next window",
		Long: `Show the rollout of every pool (or one): its phase, the release it moves
to, how many Machines run it, how many are down, the failed Machines, the
next window when none is open, and what it waits for.

NEXT WINDOW is when the next of the pool's maintenance windows opens; "open
now" while one is; "never" when none opens again (their rules ended, or a
window the pool lists is missing or invalid: the pool stays closed);
<none> for a pool without windows, which may reboot at any time.

Phases: Idle (nothing to do), Waiting (no window open), Progressing,
Settling (the settle delay after a reboot), Paused, Halted (more failures
than the budget, or aborted; 'rollout resume' continues). A pool the
rollout controller has not evaluated yet shows Pending (a new pool, until
the leader's next step, a few seconds).

Machines never provisioned (first install) are not held by windows, the
settle delay, a pause or a halt, only by maxUnavailable: the reason counts
them apart ("N awaiting first install") from the Machines to reboot.

The reason starts with "Frozen (REASON): …" while the safety controller
freezes the pool (too many Machines unhealthy at once, its Cluster's API
unreachable, more Machines than replicas: no reboot is admitted), and ends
with "replacing N Machine(s): …" while failed Machines are replaced, each
named with why (Unreachable, RevisionFailed).`,
		Example: `  roostctl rollout status
  roostctl rollout status workers -o yaml`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.argCompletions(false, objectNames("Pool")),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for a table)", output)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var pools []*roostv1.Object
			if len(args) == 1 {
				resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "Pool", Name: trimKindPrefix(args[0], "pool/", "pools/")})
				if err != nil {
					return o.wrapCallError(err)
				}
				pools = []*roostv1.Object{resp.GetObject()}
			} else {
				resp, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "Pool"})
				if err != nil {
					return o.wrapCallError(err)
				}
				pools = resp.GetObjects()
			}
			if output != "" {
				return o.printObjects(o.Out, pools, output, len(args) == 0)
			}
			var windows map[string]*roostv1.MaintenanceWindow
			if slices.ContainsFunc(pools, needsWindows) {
				resp, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "MaintenanceWindow"})
				if err != nil {
					// The NEXT WINDOW column shows <unknown>; the rest stands.
					o.debugf("listing maintenance windows: %v", err)
				} else {
					windows = map[string]*roostv1.MaintenanceWindow{}
					for _, w := range resp.GetObjects() {
						windows[resource.NameOf(w)] = w.GetMaintenanceWindow()
					}
				}
			}
			return printRolloutTable(o, pools, windows, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml (the Pools, with status.rollout)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}

// rolloutPending is the phase shown for a pool without status.rollout:
// the rollout controller (on the leader) has not evaluated it yet.
const (
	rolloutPending       = "Pending"
	rolloutPendingReason = "the rollout controller has not evaluated this pool yet"
)

// needsWindows says whether the NEXT WINDOW of a pool's rollout needs its
// MaintenanceWindows: the status names no next start, yet the pool has
// windows (one is open, or none opens again).
func needsWindows(obj *roostv1.Object) bool {
	p := obj.GetPool()
	ro := p.GetStatus().GetRollout()
	return ro.GetPhase() != "" && ro.GetNextWindowStart() == nil && len(p.GetSpec().GetMaintenanceWindows()) > 0
}

// nextWindowCell is the NEXT WINDOW of a pool whose status names no next
// start: "<none>" without windows (reboots may start at any time), "open
// now" while one of them is, "never" when none opens again (their rules
// ended; or one is missing or invalid, so the hub never opens the pool),
// "<unknown>" when the windows could not be read (windows is nil). The
// openings are computed as the hub's rollout controller and 'roostctl
// window next --pool' compute them (package window).
func nextWindowCell(p *roostv1.Pool, windows map[string]*roostv1.MaintenanceWindow, now time.Time) string {
	names := p.GetSpec().GetMaintenanceWindows()
	if len(names) == 0 {
		return "<none>"
	}
	if windows == nil {
		return "<unknown>"
	}
	var ws []*window.Window
	for _, n := range names {
		mw, ok := windows[n]
		if !ok {
			return "never"
		}
		w, err := window.Parse(mw.GetSpec())
		if err != nil {
			return "never"
		}
		ws = append(ws, w)
	}
	if _, open := window.OpenAny(ws, now); open {
		return "open now"
	}
	next := window.NextAny(ws, now, 1)
	if len(next) == 0 {
		return "never"
	}
	// The status predates the last opening's end: the next step of the
	// controller names the same start.
	return nextWindowStart(next[0].Start, now)
}

// nextWindowStart renders the start of a pool's next window opening.
func nextWindowStart(t, now time.Time) string {
	return t.Local().Format("2006-01-02 15:04 MST") + " (in " + duration.HumanDuration(t.Sub(now)) + ")"
}

// poolSafetyNotes is the REASON of a pool's rollout: its Frozen condition
// first while True (no reboot is admitted), then the rollout's reason,
// then its Remediating condition (which Machines are replaced and why).
func poolSafetyNotes(p *roostv1.Pool, reason string) string {
	var parts []string
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == "Frozen" && c.GetStatus() == "True" {
			parts = append(parts, fmt.Sprintf("Frozen (%s): %s", c.GetReason(), c.GetMessage()))
		}
	}
	if reason != "" {
		parts = append(parts, reason)
	}
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == "Remediating" && c.GetStatus() == "True" {
			parts = append(parts, c.GetMessage())
		}
	}
	return strings.Join(parts, "; ")
}

func printRolloutTable(o *options, pools []*roostv1.Object, windows map[string]*roostv1.MaintenanceWindow, now time.Time) error {
	if len(pools) == 0 {
		fmt.Fprintln(o.Out, "No pools.")
		return nil
	}
	tw := tabwriter.NewWriter(o.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "POOL\tPHASE\tTARGET\tUPDATED\tDOWN\tFAILED\tNEXT WINDOW\tREASON")
	for _, obj := range pools {
		p := obj.GetPool()
		ro := p.GetStatus().GetRollout()
		if ro.GetPhase() == "" {
			// No status.rollout yet: the controller writes it at its
			// next step (every few seconds on the leader).
			target := "-"
			if v := p.GetSpec().GetImageVersion(); v != "" {
				target = v + " (pinned)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t%s\n", p.GetMetadata().GetName(), rolloutPending, target, rolloutPendingReason)
			continue
		}
		phase := ro.GetPhase()
		var next string
		if t := ro.GetNextWindowStart(); t != nil {
			next = nextWindowStart(t.AsTime(), now)
		} else {
			next = nextWindowCell(p, windows, now)
		}
		failed := "0"
		if n := len(ro.GetFailedMachines()); n > 0 {
			failed = fmt.Sprintf("%d (%s)", n, strings.Join(ro.GetFailedMachines(), ","))
		}
		target := ro.GetTargetVersion()
		if target == "" {
			target = "<none>"
		}
		if v := p.GetSpec().GetImageVersion(); v != "" {
			target += " (pinned)"
		}
		reason := poolSafetyNotes(p, ro.GetReason())
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\n", p.GetMetadata().GetName(), phase, target, ro.GetUpdated(), ro.GetTotal(), ro.GetUnavailable(), failed, next, reason)
	}
	return tw.Flush()
}

func newPoolPinCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "pin POOL VERSION",
		Short: "Pin a pool to one image release",
		Long: `Pin the pool to one ImageRelease version (spec.imageVersion). A pin wins
over the pool's channel (spec.imageChannel), which stays set: 'pool unpin'
clears spec.imageVersion and the pool follows its channel again. The
Machines move to the pinned release like any rollout: inside the pool's
windows, within maxUnavailable, with drains for workers.

VERSION must be the version of an ImageRelease ('roostctl image list')
and is checked like spec.imageVersion in a manifest. A pinned pool's
manifest ('roostctl get pool POOL -o yaml') holds both fields and can be
applied again; applying a manifest without spec.imageVersion unpins the
pool (the hub warns).`,
		Example: `  roostctl pool pin workers 2026.11.0
  roostctl pool unpin workers`,
		Args:              exactArgs(2, "a POOL and a VERSION"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Pool"), releaseVersions),
		RunE: func(cmd *cobra.Command, args []string) error {
			if vs := resource.ValidateImageVersion("VERSION", args[1]); len(vs) > 0 {
				return usageErrorf("%s", vs[0].String())
			}
			return o.rolloutControl(cmd, &roostv1.RolloutControlRequest{Pool: trimKindPrefix(args[0], "pool/", "pools/"),
				Action: roostv1.RolloutAction_ROLLOUT_ACTION_PIN, Version: args[1]}, "pin")
		},
	}
}

func newPoolUnpinCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "unpin POOL",
		Short: "Let a pool follow its image channel again",
		Long: `Clear the pool's pinned version (spec.imageVersion): the pool follows its
image channel again, and moves to the channel's newest release like any
rollout.`,
		Example:           `  roostctl pool unpin workers`,
		Args:              exactArgs(1, "a POOL"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Pool")),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.rolloutControl(cmd, &roostv1.RolloutControlRequest{Pool: trimKindPrefix(args[0], "pool/", "pools/"),
				Action: roostv1.RolloutAction_ROLLOUT_ACTION_UNPIN}, "unpin")
		},
	}
}
