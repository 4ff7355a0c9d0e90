// Package cli is roostctl, the command-line client of the Roost hub: every
// command is a cobra.Command built by NewRootCommand, so the reference in
// docs/cli/ is generated from the same code that runs (`roostctl docs DIR`).
//
// The CLI talks to the hub only through the gRPC API in proto/roost/v1; it
// reads and checks manifests with package resource and dials the hub with
// package client.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/client"
)

// Exit codes roostctl returns; scripts may rely on them.
const (
	// ExitOK means the command did what it was asked.
	ExitOK = 0
	// ExitFailed means a request reached the hub and the hub refused it
	// (NotFound, FailedPrecondition, AlreadyExists, PermissionDenied,
	// Aborted: an apply whose metadata.modifyIndex or uid no longer
	// matches, …).
	ExitFailed = 1
	// ExitUsage means bad usage or invalid input: unknown flags or kinds,
	// wrong arguments, unreadable or invalid manifests (found locally, or
	// InvalidArgument from the hub), no usable client configuration.
	ExitUsage = 2
	// ExitUnreachable means no hub member answered (Unavailable or
	// DeadlineExceeded after trying every member) and the write that
	// failed was not applied: it either never left roostctl or every
	// member that answered refused it before proposing it. (A command of
	// several writes, e.g. delete A B, stops there; the writes before it
	// were applied.)
	ExitUnreachable = 3
	// ExitUnknown means a write's outcome is unknown: it reached the hub
	// and the hub may or may not have applied it (the leader was lost
	// while it committed, the connection dropped after it was sent,
	// --timeout ran out meanwhile). Check the state, or run the command
	// again with the --request-id it printed: the hub applies a request
	// ID at most once (for an hour).
	ExitUnknown = 4
)

// Streams are the standard streams a command reads and writes.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// options are the global flags and state shared by every command.
type options struct {
	Streams
	configPath string
	hubs       []string
	timeout    time.Duration
	verbose    bool
	// now is the clock used for ages in tables; tests fix it.
	now func() time.Time
	// started is set once cobra has parsed the flags and arguments and the
	// command begins to run; errors before that are usage errors.
	started bool
	// tried lists the hub addresses of the last connection, for messages.
	tried []string
	// configSource says where the configuration came from, for messages.
	configSource string
	// requestID is --request-id; requestIDs gives the command's write
	// calls their request IDs (its Base is set when the command starts).
	requestID  string
	requestIDs *client.RequestIDs
}

const rootLong = `roostctl manages a Roost fleet: bare-metal (or virtual) Kubernetes worker
machines owned by the Roost hub. It works like kubectl: you write the desired
state (Clusters, Pools, MachineClasses, NetworkProfiles, MaintenanceWindows) as
YAML manifests, apply them, and read back what the hub and its agents observe
(Servers, Machines, ImageReleases, Leases, …).

Configuration:
  roostctl reads its client configuration (hub addresses, the pinned hub CA,
  a client certificate and key) from --config, else $ROOST_CONFIG, else
  ~/.roost/config. A new hub writes one for its administrator to
  DATA_DIR/admin.conf. --hub overrides the configuration's hub list; calls
  fail over between the listed members.

Exit codes (stable, for scripts):
  0  success
  1  the hub refused the request (not found, failed precondition, in use,
     changed since it was read, …)
  2  bad usage or invalid input: flags, arguments, unknown kinds, manifests
     that fail validation (locally or at the hub), no usable configuration
  3  hub unreachable: no member answered (unavailable or timed out); the
     write that failed was not applied
  4  outcome unknown: a write reached the hub, which may or may not have
     applied it (the leader was lost, the connection dropped or --timeout
     ran out while it committed); check with 'roostctl get ...', or run the
     same command again with the --request-id it printed, which the hub
     applies at most once (for an hour)

Errors go to standard error, prefixed with "error:" (problems found locally)
or "Error from hub:" (requests the hub refused), one violation per line.`

const rootExample = `  # Point roostctl at the configuration a new hub wrote
  export ROOST_CONFIG=/var/lib/roost-hub/admin.conf

  # Create or update everything described in a directory of manifests
  roostctl apply -f manifests/

  # List pools, then look at one in detail
  roostctl get pools
  roostctl describe pool workers

  # Talk to specific hub members instead of the configured ones
  roostctl --hub 10.0.0.1:7443,10.0.0.2:7443 hub members`

// NewRootCommand builds the roostctl command tree writing to streams.
func NewRootCommand(streams Streams) *cobra.Command {
	o := &options{Streams: streams, timeout: 30 * time.Second, now: time.Now}
	return newRootCommand(o)
}

func newRootCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:           "roostctl",
		Short:         "Manage a Roost fleet of Kubernetes worker machines",
		Long:          rootLong,
		Example:       rootExample,
		SilenceErrors: true,
		SilenceUsage:  true,
		// No Run: without a subcommand, roostctl prints its help.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if o.timeout <= 0 {
				return usageErrorf("--timeout must be positive, got %s", o.timeout)
			}
			// cobra checks required flags only after this hook, when the
			// command counts as started; check them here so that a missing
			// one is bad usage (exit 2, with a pointer to --help).
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return err
			}
			if err := o.startRequestIDs(); err != nil {
				return err
			}
			o.started = true
			return nil
		},
	}
	root.SetIn(o.In)
	root.SetOut(o.Out)
	root.SetErr(o.Err)
	root.CompletionOptions.DisableDefaultCmd = true
	root.DisableAutoGenTag = true // generated docs stay byte-identical between runs
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{flagError(err)} })

	pf := root.PersistentFlags()
	pf.StringVar(&o.configPath, "config", "", "client configuration `FILE` (hub addresses, CA, client certificate)\n(default $ROOST_CONFIG, then ~/.roost/config)")
	pf.StringSliceVar(&o.hubs, "hub", nil, "hub API `ADDRESSES` host:port, comma-separated, used instead of the\nconfiguration's list; calls fail over between them")
	pf.DurationVar(&o.timeout, "timeout", o.timeout, "how long to wait for the hub, per command (e.g. 10s, 2m);\n--watch streams are not limited")
	pf.StringVar(&o.requestID, "request-id", "", "`ID` of this command's writes (letters, digits, '.', '_', ':', '-'; at most 100):\n"+
		"the hub applies each at most once for an hour, so running a command\nagain with the ID it printed after exit code 4 cannot apply it twice\n(default: a fresh random ID)")
	pf.BoolVarP(&o.verbose, "verbose", "v", false, "print what roostctl does (configuration, hub addresses, each call and\nits duration) to standard error")

	root.AddGroup(
		&cobra.Group{ID: "objects", Title: "Objects:"},
		&cobra.Group{ID: "fleet", Title: "Servers and enrollment:"},
		&cobra.Group{ID: "hub", Title: "The hub:"},
		&cobra.Group{ID: "other", Title: "Other commands:"},
	)
	for _, c := range []*cobra.Command{newApplyCommand(o), newGetCommand(o), newDescribeCommand(o), newDeleteCommand(o)} {
		c.GroupID = "objects"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newServerCommand(o), newTokenCommand(o), newNetbootCommand(o), newClusterCommand(o), newNetprofileCommand(o), newPoolCommand(o), newRolloutCommand(o), newMachineCommand(o), newImageCommand(o), newExtensionCommand(o)} {
		c.GroupID = "fleet"
		root.AddCommand(c)
	}
	root.AddCommand(newWindowCommand(o)) // in the "fleet" group
	for _, c := range []*cobra.Command{newHubCommand(o), newUserCommand(o), newAuthCommand(o), newAuditCommand(o)} {
		c.GroupID = "hub"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newVersionCommand(o), newCompletionCommand(o)} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	root.AddCommand(newDocsCommand(o))
	root.SetHelpCommandGroupID("other")
	return root
}

// Execute runs roostctl with the process's arguments and standard streams
// and returns the exit code. Interrupts (Ctrl-C) and SIGTERM cancel the
// running command.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, os.Args[1:], Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
}

// Run runs roostctl with args and returns the exit code; errors are printed
// to streams.Err.
func Run(ctx context.Context, args []string, streams Streams) int {
	o := &options{Streams: streams, timeout: 30 * time.Second, now: time.Now}
	return o.run(ctx, args)
}

func (o *options) run(ctx context.Context, args []string) int {
	root := newRootCommand(o)
	root.SetArgs(args)
	o.requestIDs = &client.RequestIDs{}
	cmd, err := root.ExecuteContextC(client.WithRequestIDs(ctx, o.requestIDs))
	if err == nil {
		return ExitOK
	}
	if !o.started && !isReported(err) {
		err = cobraUsage{err}
	}
	code := exitCode(err)
	if !isReported(err) {
		if isOutcomeUnknown(err) {
			o.printOutcomeUnknown(err, cmd)
		} else {
			printError(o.Err, err)
		}
	}
	if code == ExitUsage && cmd != nil && isCobraUsage(err) {
		fmt.Fprintf(o.Err, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}
