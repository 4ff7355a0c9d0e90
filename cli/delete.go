package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const deleteExample = `  # Delete two pools
  roostctl delete pool workers-a workers-b

  # Delete everything a directory of manifests describes (dependents first)
  roostctl delete -f manifests/

  # Succeed even when the object is already gone
  roostctl delete cluster prod --ignore-not-found`

type deleteOptions struct {
	files          []string
	ignoreNotFound bool
	force          bool
}

// deleteTarget is one object to delete.
type deleteTarget struct {
	kind *resource.Kind
	name string
}

func newDeleteCommand(o *options) *cobra.Command {
	d := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete (KIND NAME... | -f FILE|DIR|-)",
		Short: "Delete objects by name or as named in manifests",
		Long: `Delete objects, either by KIND and NAME, or every object named in manifests
(-f, read like 'roostctl apply -f'; only kind and metadata.name matter).

Objects named in manifests are deleted Pools first, then the rest in the
reverse of their order in the files, so that objects are deleted before what
they reference (a Pool before its Cluster). The hub refuses to delete an object that
others still reference (exit code 1): delete the referring objects first.

Each object is deleted on its own, not all or nothing: roostctl goes on after
a failure, prints every failure, and exits non-zero when any occurred.

Deleting a worker Machine cordons and drains its Node first (see 'roostctl
pool unassign --help'); --force deletes it at once. A Server is deleted only
once Decommissioned ('roostctl server decommission'), or with --force (never
while a Machine claims it); an agent that still runs with a valid certificate
records it again, PendingApproval (deny it to keep it out).`,
		Example:           deleteExample,
		ValidArgsFunction: o.kindAndNameCompletions(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runDelete(cmd, d, args)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&d.files, "filename", "f", nil, "manifest `FILE`, directory or - (standard input) naming the objects to\ndelete; repeatable")
	f.BoolVar(&d.ignoreNotFound, "ignore-not-found", false, "treat objects that do not exist as deleted (exit code 0)")
	f.BoolVar(&d.force, "force", false, "for Machines: release workers at once, without cordoning and draining their\nNodes (their pods stop with the host); for Servers: delete one that is not\nDecommissioned; other kinds ignore it")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func (o *options) deleteTargets(d *deleteOptions, args []string) ([]deleteTarget, error) {
	switch {
	case len(d.files) > 0 && len(args) > 0:
		return nil, usageErrorf("give KIND NAME... or -f, not both")
	case len(d.files) > 0:
		inputs, err := o.readInputs(d.files)
		if err != nil {
			return nil, err
		}
		ms, diags := decodeInputs(inputs, resource.NamesOnly())
		if len(diags) > 0 {
			o.printDiagnostics(fmt.Sprintf("%s in the manifests; nothing was deleted:", problems(len(diags))), diags)
			return nil, reportedError{ExitUsage}
		}
		var out []deleteTarget
		for i := len(ms) - 1; i >= 0; i-- {
			out = append(out, deleteTarget{kind: ms[i].Kind, name: ms[i].Name()})
		}
		if len(out) == 0 {
			return nil, usageErrorf("the manifests hold no objects")
		}
		// Pools reference the other kinds: delete them first, whatever the file order.
		sort.SliceStable(out, func(i, j int) bool { return out[i].kind.Name == "Pool" && out[j].kind.Name != "Pool" })
		return out, nil
	case len(args) == 0:
		return nil, usageErrorf("nothing to delete: give KIND NAME... or -f FILE")
	case len(args) == 1:
		return nil, usageErrorf("give the names of the %s objects to delete after the kind", args[0])
	}
	k, err := lookupKind(args[0])
	if err != nil {
		return nil, err
	}
	var out []deleteTarget
	for _, name := range args[1:] {
		out = append(out, deleteTarget{kind: k, name: name})
	}
	return out, nil
}

func (o *options) runDelete(cmd *cobra.Command, d *deleteOptions, args []string) error {
	targets, err := o.deleteTargets(d, args)
	if err != nil {
		return err
	}
	open := o.open
	if slices.ContainsFunc(targets, func(t deleteTarget) bool { return t.kind.Name == "Machine" }) {
		open = func(context.Context) (context.Context, *hubConn, func(), error) { return o.openRelease(cmd, d.force) }
	}
	ctx, conn, done, err := open(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	var failed error
	for _, t := range targets {
		ref := t.kind.Singular + "/" + t.name
		_, err := conn.hub.Delete(ctx, &roostv1.DeleteRequest{Kind: t.kind.Name, Name: t.name, Force: d.force})
		if err != nil {
			err = o.wrapCallError(err)
			if d.ignoreNotFound && statusCode(err) == codes.NotFound {
				o.debugf("%s: not found, ignored", ref)
				continue
			}
			if !isHubError(err) {
				return err // unreachable: stop here
			}
			printError(o.Err, err)
			if failed == nil {
				failed = reportedError{exitCode(err)}
			}
			continue
		}
		fmt.Fprintf(o.Out, "%s deleted\n", ref)
	}
	return failed
}
