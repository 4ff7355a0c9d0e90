package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const applyLong = `Create or update objects from YAML (or JSON) manifests.

Each -f names a file, a directory (its *.yaml, *.yml and *.json files, sorted
by name, not recursive) or "-" for standard input; -f may be repeated. A file
may hold many objects separated by "---", or a "kind: List" with items (its
apiVersion roost.io/v1, or v1 as kubectl writes it).

roostctl first reads and validates every manifest locally and reports every
problem of every file with its file:line:column; if there is any, nothing is
sent and roostctl exits with code 2. Then all objects go to the hub in one
request that is applied all or nothing: either every object is stored or none
is. Problems the hub finds (for example a Pool naming a Cluster that does not
exist) are reported at their place in the manifests too.

For every object roostctl prints what happened:
  pool/workers created       the object did not exist
  pool/workers configured    its spec, labels or annotations changed
  pool/workers unchanged     it already looked like this

An apply replaces an object's spec, with one exception: a Pool paused with
'roostctl rollout pause' stays paused when its manifest does not set
spec.rollout.paused (only 'roostctl rollout resume' lifts a pause). The hub
then warns ("Warning from hub: ..." on standard error), as it does when the
manifest drops a Pool's pin (spec.imageVersion): the pool is unpinned and
follows its channel again.

What 'roostctl get KIND NAME -o yaml' prints applies again as it is: an
apply ignores a status section and the hub-set metadata createIndex and
creationTimestamp. modifyIndex, generation and uid are preconditions, as
resourceVersion and uid are for kubectl, checked by the hub in the same
all-or-nothing write:

  metadata.modifyIndex   nobody may have changed the object since it was
                         read (if it was deleted since, the apply fails
                         too); the hub's own status writes do not count
                         while generation (spec changes), labels and
                         annotations are the stored ones
  metadata.uid           the object must not have been deleted and created
                         again since it was read (ignored when creating)

If one fails, nothing is applied and roostctl exits with code 1:
  Error from hub: an object changed since it was read; nothing was applied:
  pool.yaml:4:3: Pool "workers": metadata.modifyIndex: modified since it was
  read (modifyIndex 42, now 57) (get it again and re-apply your change, or
  remove metadata.modifyIndex to overwrite)
A manifest without them overwrites what is stored. --dry-run checks them too.

Only desired-state kinds can be applied: Cluster, Pool, MachineClass,
NetworkProfile and MaintenanceWindow. The hub and the agents write the others.

Exit codes: 0 applied (or unchanged), 1 the hub refused (a reference to a
missing object, a conflict with a concurrent change, …), 2 a manifest has a
problem, 3 hub unreachable.`

const applyExample = `  # Apply one manifest
  roostctl apply -f pool.yaml

  # Apply a directory of manifests and another file, all or nothing
  roostctl apply -f manifests/ -f extra-pool.yaml

  # Check manifests against the hub's current state without storing anything
  roostctl apply -f manifests/ --dry-run

  # Read a manifest from standard input
  cat pool.yaml | roostctl apply -f -

  # Change an object as it is stored; fails if it changes meanwhile
  roostctl get pool workers -o yaml > workers.yaml   # then edit workers.yaml
  roostctl apply -f workers.yaml`

type applyOptions struct {
	files  []string
	dryRun bool
	output string
}

func newApplyCommand(o *options) *cobra.Command {
	a := &applyOptions{}
	cmd := &cobra.Command{
		Use:     "apply -f FILE|DIR|- [-f ...]",
		Short:   "Create or update objects from manifest files, all or nothing",
		Long:    applyLong,
		Example: applyExample,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runApply(cmd, a)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&a.files, "filename", "f", nil, "manifest `FILE`, directory of *.yaml/*.yml/*.json files, or - for standard\ninput; repeat to apply several together")
	f.BoolVar(&a.dryRun, "dry-run", false, "let the hub check the objects (including references to other objects)\nwithout storing anything")
	f.StringVarP(&a.output, "output", "o", "", "output `FORMAT`: json or yaml (default: one line per object)")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions("json", "yaml"))
	return cmd
}

// applyOutput is the -o json|yaml form of apply's outcome; json and yaml
// use the same field names.
type applyOutput struct {
	DryRun  bool              `json:"dryRun" yaml:"dryRun"`
	Index   uint64            `json:"index" yaml:"index"`
	Results []applyResultJSON `json:"results" yaml:"results"`
}

type applyResultJSON struct {
	Kind   string `json:"kind" yaml:"kind"`
	Name   string `json:"name" yaml:"name"`
	Action string `json:"action" yaml:"action"`
}

func (o *options) runApply(cmd *cobra.Command, a *applyOptions) error {
	switch a.output {
	case "", "json", "yaml":
	default:
		return usageErrorf("--output %q: apply prints json or yaml (or, without -o, one line per object)", a.output)
	}
	inputs, err := o.readInputs(a.files)
	if err != nil {
		return err
	}
	ms, diags := decodeInputs(inputs, resource.ForApply())
	diags = append(diags, resource.ValidateManifests(ms)...)
	diags = append(diags, checkObjectSizes(ms)...)
	if len(diags) > 0 {
		sortDiagnostics(inputs, diags)
		o.printDiagnostics(fmt.Sprintf("%s in the manifests; nothing was sent to the hub:", problems(len(diags))), diags)
		return reportedError{ExitUsage}
	}
	if len(ms) == 0 {
		return usageErrorf("the manifests hold no objects")
	}

	ctx, conn, done, err := o.open(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	o.debugf("applying %d objects (dry run: %t)", len(ms), a.dryRun)
	var hdr metadata.MD
	resp, err := conn.hub.Apply(ctx, &roostv1.ApplyRequest{Objects: objectsOf(ms), DryRun: a.dryRun}, grpc.Header(&hdr))
	if err != nil {
		return o.reportApplyError(ms, o.wrapCallError(err))
	}
	// The hub's warnings (a Pool's pause kept, a pin dropped) go to
	// standard error after what was applied, also with -o.
	defer printWarnings(o.Err, hdr)

	if a.output != "" {
		out := applyOutput{DryRun: a.dryRun, Index: resp.GetIndex(), Results: []applyResultJSON{}}
		for _, r := range resp.GetResults() {
			out.Results = append(out.Results, applyResultJSON{Kind: r.GetKind(), Name: r.GetName(), Action: r.GetAction()})
		}
		return writeStructured(o.Out, out, a.output)
	}
	suffix := ""
	if a.dryRun {
		suffix = " (dry run)"
	}
	for _, r := range resp.GetResults() {
		fmt.Fprintf(o.Out, "%s %s%s\n", ref(r.GetKind(), r.GetName()), r.GetAction(), suffix)
	}
	return nil
}

// reportApplyError prints a hub refusal with its field violations placed in
// the manifests, and returns the exit code for it.
func (o *options) reportApplyError(ms []*resource.Manifest, err error) error {
	if !isHubError(err) {
		return err
	}
	e := apierror.FromError(err)
	if len(e.Violations) == 0 {
		return err
	}
	located, rest := locateViolations(ms, e.Violations)
	msg := e.Message
	if e.Code == codes.Aborted && len(rest) == 0 {
		// The hub's message repeats the one conflict (or lists the
		// objects); the lines below say it where the manifests say it.
		msg = "an object changed since it was read"
		if len(located) > 1 {
			msg = fmt.Sprintf("%d objects changed since they were read", len(located))
		}
	}
	fmt.Fprintf(o.Err, "Error from hub: %s; nothing was applied:\n", msg)
	fmt.Fprint(o.Err, resource.FormatViolations(located))
	for _, v := range rest {
		fmt.Fprintf(o.Err, "  %s\n", v.String())
	}
	return reportedError{exitCodeOf(e.Code)}
}
