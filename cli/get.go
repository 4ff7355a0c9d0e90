package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/roostfleet/roost/cli/printers"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const getExample = `  # List all pools as a table
  roostctl get pools

  # More columns
  roostctl get servers -o wide

  # Two machine classes by name, as YAML (byte-for-byte stable)
  roostctl get machineclass big small -o yaml

  # Servers in rack r12, by label
  roostctl get servers -l rack=r12

  # Just the names, for scripts
  roostctl get pools -o name

  # Answer from the member you reach, even if it lags the leader
  roostctl get servers --stale

  # Keep printing machines as they change, until Ctrl-C
  roostctl get machines --watch

  # The operations log of one pool, and then what happens next
  roostctl get events --for pool/workers --watch

  # Release feeds: readiness, last poll, releases imported (-o wide: failed ones)
  roostctl get feeds`

type getOptions struct {
	output   string
	selector string
	stale    bool
	watch    bool
	// forObject is --for KIND/NAME (Events only).
	forObject string
}

func newGetCommand(o *options) *cobra.Command {
	g := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get KIND [NAME...]",
		Short: "List objects of a kind, or show some by name",
		Long: `List the objects of one kind, or the named ones.

KIND is a kind name in any form: singular, plural or short name, in any case
("pool", "pools", "pl", "Pool"). The kinds and their names:
` + kindHelp() + `

Reads are linearizable by default: the answer reflects every change that
completed before the command started (the member you reach asks the leader).
--stale answers from the reached member's own copy, which is faster and
works without a leader, but may lag.

Output formats (-o):
  table   one row per object (the default)
  wide    the table with more columns
  json    the objects as JSON; a "kind: List" unless you name exactly one
  yaml    the objects as YAML documents separated by "---"; no objects are an
          empty "kind: List", as in json
  name    kind/name, one per line
json and yaml are byte-for-byte the same for the same objects, so they can be
compared and stored. Getting a name that does not exist fails with exit code 1.

Events (the operations log: what the hub did and why) list oldest first by
when they were last seen; --for KIND/NAME keeps those about one object
(pool/workers, machine/NAME, server/NAME).

With --watch, roostctl prints every object, then a row for every change as it
happens (EVENT column: ADDED, MODIFIED, DELETED) until interrupted (Ctrl-C),
reconnecting to another member when the one it talks to goes away. When no
member answers (the only member stopped, or none for --timeout), it ends
with exit code 3.`,
		Example:           getExample,
		Args:              minArgs(1, "a KIND (e.g. pools)"),
		ValidArgsFunction: o.kindAndNameCompletions(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runGet(cmd, g, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&g.output, "output", "o", outTable, "output `FORMAT`: table, wide, json, yaml or name")
	f.StringVarP(&g.selector, "selector", "l", "", "filter by a label `SELECTOR`, Kubernetes style: 'env=prod', 'tier!=db',\n'rack in (r1,r2)', 'gpu' (has the label), '!gpu'; comma means and")
	f.BoolVar(&g.stale, "stale", false, "read the reached member's local state without asking the leader\n(faster, works without a leader, may lag)")
	f.BoolVarP(&g.watch, "watch", "w", false, "after listing, keep printing changes until interrupted")
	f.StringVar(&g.forObject, "for", "", "with events: only the Events about `KIND/NAME`, e.g. pool/workers, server/NAME")
	_ = cmd.RegisterFlagCompletionFunc("for", o.flagCompletions(objectRefs))
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outWide, outJSON, outYAML, outName))
	return cmd
}

func checkGetOutput(format string) error {
	switch format {
	case outTable, outWide, outJSON, outYAML, outName:
		return nil
	}
	return usageErrorf("--output %q: use table, wide, json, yaml or name", format)
}

func consistency(stale bool) roostv1.Consistency {
	if stale {
		return roostv1.Consistency_CONSISTENCY_STALE
	}
	return roostv1.Consistency_CONSISTENCY_LINEARIZABLE
}

func (o *options) runGet(cmd *cobra.Command, g *getOptions, args []string) error {
	if err := checkGetOutput(g.output); err != nil {
		return err
	}
	k, err := lookupKind(args[0])
	if err != nil {
		return err
	}
	names := args[1:]
	if g.selector != "" && len(names) > 0 {
		return usageErrorf("give names or --selector, not both")
	}
	var sel labels.Selector
	if g.selector != "" {
		if sel, err = labels.Parse(g.selector); err != nil {
			return usageErrorf("--selector %q: %v", g.selector, err)
		}
	}
	involved, err := parseFor(g.forObject, k)
	if err != nil {
		return err
	}
	if involved != nil && len(names) > 0 {
		return usageErrorf("give Event names or --for, not both")
	}
	if g.watch {
		return o.runWatch(cmd.Context(), g, k, names, sel, involved)
	}

	ctx, conn, done, err := o.open(cmd.Context())
	if err != nil {
		return err
	}
	defer done()

	var (
		objs   []*roostv1.Object
		failed error
	)
	if len(names) == 0 {
		resp, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: k.Name, LabelSelector: g.selector, Consistency: consistency(g.stale), InvolvedObject: involved})
		if err != nil {
			return o.wrapCallError(err)
		}
		objs = resp.GetObjects()
		if k.Name == "Event" {
			objs = printers.SortEvents(objs)
		}
	} else {
		for _, name := range names {
			resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: k.Name, Name: name, Consistency: consistency(g.stale)})
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
			objs = append(objs, resp.GetObject())
		}
	}
	if err := o.printObjects(o.Out, objs, g.output, len(names) != 1); err != nil {
		return err
	}
	if len(objs) == 0 && len(names) == 0 && (g.output == outTable || g.output == outWide) {
		fmt.Fprintf(o.Err, "No %s found.\n", k.Plural)
	}
	return failed
}

// printObjects writes objs in an output format of get. Write-only fields
// (a Cluster's spec.kubeconfig) are never printed, even if a hub sent them.
func (o *options) printObjects(w io.Writer, objs []*roostv1.Object, format string, asList bool) error {
	objs = resource.StripWriteOnlyAll(objs)
	switch format {
	case outTable, outWide:
		if len(objs) == 0 {
			return nil
		}
		return printers.PrintTable(w, objs, format == outWide, o.now())
	case outName:
		for _, obj := range objs {
			fmt.Fprintln(w, objectRef(obj))
		}
		return nil
	case outJSON, outYAML:
		data, err := encodeObjects(objs, format, asList)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return checkGetOutput(format)
}

// watchRetry is the pause before a watch reconnects.
var watchRetry = time.Second

// runWatch streams the objects of kind k and their changes until ctx ends.
//
// When the stream breaks, it reconnects from the last index, on whichever
// member answers. A member that stops ends its streams with Unavailable
// (memberStopping): the watch goes on on another member, or, when no other
// member answers (a single-member hub), ends with exit code 3 at once. A
// watch that reaches no member for --timeout ends the same way.
func (o *options) runWatch(ctx context.Context, g *getOptions, k *resource.Kind, names []string, sel labels.Selector, involved *roostv1.EventObject) error {
	dialCtx, cancel := o.withTimeout(ctx)
	conn, err := o.connect(dialCtx)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()

	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	p := &watchPrinter{o: o, format: g.output}
	if g.output == outTable || g.output == outWide {
		// Size the columns for the objects there are, so that the first
		// rows (one event each) line up too.
		if resp, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: k.Name, Consistency: roostv1.Consistency_CONSISTENCY_STALE}); err == nil {
			p.size(k, resp.GetObjects())
		}
	}
	var from uint64
	// stopping is the notice of the member the watch was on (stoppingAddr)
	// that it is stopping, until another member answers; lostSince is
	// when reaching no member began, zero while one answers.
	var stopping error
	var stoppingAddr string
	var lostSince time.Time
	for {
		// answered is the last member that answered the Watch (gRPC's own
		// retries included), events whether it delivered any.
		var answered peer.Peer
		events := false
		err := o.watchOnce(ctx, conn, k, from, &answered, func(ev *roostv1.WatchEvent) error {
			events = true
			if ev.GetIndex() > from {
				from = ev.GetIndex()
			}
			obj := ev.GetObject()
			if len(wanted) > 0 && !wanted[resource.NameOf(obj)] {
				return nil
			}
			if sel != nil && !sel.Matches(labels.Set(objectLabels(obj))) {
				return nil
			}
			if io := obj.GetEvent().GetSpec().GetInvolvedObject(); involved != nil && (io.GetKind() != involved.GetKind() || io.GetName() != involved.GetName()) {
				return nil
			}
			return p.print(ev)
		})
		if ctx.Err() != nil {
			return nil // interrupted: the normal end of a watch
		}
		addr := ""
		if answered.Addr != nil {
			addr = answered.Addr.String()
		}
		// reached: a member answered, other than one that said it stops.
		reached := events || (addr != "" && addr != stoppingAddr)
		switch {
		case memberStopping(err):
			stopping, stoppingAddr, reached = err, addr, true
		case reached:
			stopping, stoppingAddr = nil, ""
		}
		if reached {
			lostSince = time.Time{}
		}
		err = o.wrapCallError(err)
		switch {
		case err == nil:
			o.debugf("watch stream ended; reconnecting from index %d", from)
		case exitCode(err) == ExitUnreachable:
			if !reached {
				if stopping != nil {
					return o.watchLost(stopping, err)
				}
				if lostSince.IsZero() {
					lostSince = time.Now()
				} else if time.Since(lostSince) >= o.timeout {
					return o.watchLost(nil, err)
				}
			}
			o.debugf("watch interrupted (%v); reconnecting from index %d", err, from)
		case isHubError(err) && statusCode(err) == codes.OutOfRange:
			o.debugf("the hub no longer has events after index %d; listing again", from)
			from = 0
		case isHubError(err) && statusCode(err) == codes.Aborted:
			// The watch fell behind, or the state was restored from a
			// snapshot: start over from a fresh list, as kubectl does.
			o.debugf("%v; listing again", err)
			from = 0
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchRetry):
		}
	}
}

// stoppingSuffix ends the message of the Unavailable a hub member ends its
// streams with when it stops (hub: Hub.stoppingError).
const stoppingSuffix = " is stopping; reconnect to another member"

// memberStopping says whether err is a hub member's notice that it is
// stopping.
func memberStopping(err error) bool {
	st, ok := grpcStatus(err)
	return ok && st.Code() == codes.Unavailable && strings.HasSuffix(st.Message(), stoppingSuffix)
}

// watchLost is the error a watch ends with when no member answers: after
// the member it was on stopped (stopping, that member's notice), or for
// --timeout (stopping nil). last is the last attempt's error.
func (o *options) watchLost(stopping, last error) error {
	tried := fmt.Sprintf("tried %s (from %s)", strings.Join(o.tried, ", "), o.hubSource())
	if stopping != nil {
		st, _ := grpcStatus(stopping)
		msg := strings.TrimSuffix(st.Message(), stoppingSuffix)
		return unreachableHint{
			hint: tried + ": no other member answered; watch again once a member is back" + hubsHint(o),
			err:  status.Errorf(codes.Unavailable, "the watch ended: %s stopped, and no other hub member answered", msg),
		}
	}
	msg := last.Error()
	if st, ok := grpcStatus(last); ok {
		msg = st.Message()
	}
	return unreachableHint{
		hint: tried + "; watch again once a member is back" + hubsHint(o),
		err:  status.Errorf(codes.Unavailable, "the watch ended: no hub member answered for %s (--timeout): %s", o.timeout, oneLine(msg)),
	}
}

// hubsHint points at --hub when the members come from the configuration.
func hubsHint(o *options) string {
	if len(o.hubs) == 0 {
		return " (--hub lists other members)"
	}
	return ""
}

func (o *options) watchOnce(ctx context.Context, conn *hubConn, k *resource.Kind, from uint64, answered *peer.Peer, fn func(*roostv1.WatchEvent) error) error {
	stream, err := conn.hub.Watch(ctx, &roostv1.WatchRequest{Kind: k.Name, FromIndex: from}, grpc.Peer(answered))
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// watchPrinter prints watch events in an output format of get.
type watchPrinter struct {
	o          *options
	format     string
	headerDone bool
	// widths holds each table column's width so far, in runes: rows are
	// printed one event at a time, each padded to the widest cell seen
	// in its column (the header's included), so later rows line up with
	// earlier ones unless a cell is wider than any before.
	widths []int
}

// Table layout of the watch, as printers.PrintTable's tabwriter: a
// column is at least watchMinWidth wide, with watchPadding spaces after
// its widest cell.
const (
	watchMinWidth = 10
	watchPadding  = 3
)

// size widens the columns for the header of kind k and the rows of objs.
func (p *watchPrinter) size(k *resource.Kind, objs []*roostv1.Object) {
	p.grow(printers.Columns(k, p.format == outWide))
	for _, o := range objs {
		if cells, err := printers.TableRow(o, p.format == outWide, p.o.now()); err == nil {
			p.grow(cells)
		}
	}
}

// grow widens the columns for cells wider than any before.
func (p *watchPrinter) grow(cells []string) {
	for i, c := range cells {
		n := utf8.RuneCountInString(c)
		if i == len(p.widths) {
			p.widths = append(p.widths, 0)
		}
		p.widths[i] = max(p.widths[i], n)
	}
}

// row lays cells out in the columns, widening them for cells wider than
// any before.
func (p *watchPrinter) row(cells []string) string {
	p.grow(cells)
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", max(p.widths[i]+watchPadding, watchMinWidth)-utf8.RuneCountInString(c)))
		}
	}
	return b.String()
}

// eventColumn is the width of the EVENT column.
const eventColumn = "%-10s"

func eventName(t roostv1.WatchEvent_Type) string {
	return strings.TrimPrefix(t.String(), "TYPE_")
}

func (p *watchPrinter) print(ev *roostv1.WatchEvent) error {
	w := p.o.Out
	obj := resource.StripWriteOnly(ev.GetObject())
	switch p.format {
	case outTable, outWide:
		cells, err := printers.TableRow(obj, p.format == outWide, p.o.now())
		if err != nil {
			return err
		}
		if !p.headerDone {
			_, k := resource.Unwrap(obj)
			p.grow(cells) // the first row counts too
			fmt.Fprintf(w, eventColumn+"%s\n", "EVENT", p.row(printers.Columns(k, p.format == outWide)))
			p.headerDone = true
		}
		fmt.Fprintf(w, eventColumn+"%s\n", eventName(ev.GetType()), p.row(cells))
		return nil
	case outName:
		fmt.Fprintf(w, "%s %s\n", strings.ToLower(eventName(ev.GetType())), objectRef(obj))
		return nil
	case outYAML:
		data, err := resource.Encode([]*roostv1.Object{obj}, outYAML)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# %s at index %d\n", eventName(ev.GetType()), ev.GetIndex())
		_, err = w.Write(append([]byte("---\n"), data...))
		return err
	case outJSON:
		data, err := resource.Encode([]*roostv1.Object{obj}, outJSON)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return checkGetOutput(p.format)
}

// objectLabels returns the labels of the object inside o.
func objectLabels(o *roostv1.Object) map[string]string {
	r, _ := resource.Unwrap(o)
	if r == nil {
		return nil
	}
	return r.GetMetadata().GetLabels()
}

func statusCode(err error) codes.Code {
	if st, ok := grpcStatus(err); ok {
		return st.Code()
	}
	return codes.Unknown
}

// parseFor reads --for KIND/NAME for a get of kind k: nil when unset; a
// usage error (exit code 2) when k is not Event or the value is not an
// object reference of a known kind.
func parseFor(ref string, k *resource.Kind) (*roostv1.EventObject, error) {
	if ref == "" {
		return nil, nil
	}
	if k.Name != "Event" {
		return nil, usageErrorf("--for applies to events only (roostctl get events --for %s)", ref)
	}
	kind, name, ok := strings.Cut(ref, "/")
	if !ok || name == "" {
		return nil, usageErrorf("--for %q: want KIND/NAME, e.g. pool/workers", ref)
	}
	ik, err := resource.Lookup(kind)
	if err != nil {
		return nil, usageErrorf("--for %q: %v", ref, err)
	}
	return &roostv1.EventObject{Kind: ik.Name, Name: name}, nil
}
