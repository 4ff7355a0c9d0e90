package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

// referenceWarnings returns warnings about an applied object that is valid
// but cannot do what it is for yet, as kubectl warns about a Service
// selecting no pods: a Pool pinned to a version no ImageRelease has, or
// following a channel no release is on (it waits until one is pushed or
// promoted); a MaintenanceWindow whose rule never opens again after the
// command's time (UNTIL or COUNT passed); a Pool all of whose windows never
// open again (its rollouts would wait forever). They are read from the
// transaction, so objects of the same command count, and they change
// nothing (the apply succeeds either way). Warnings about the object
// alone follow (see spec_warnings.go): a Pool's node labels its kubelets
// may not set (nodeLabelWarnings), a MachineClass's selector terms that
// cannot match as meant (selectorWarnings).
func (a *applier) referenceWarnings(obj *roostv1.Object) ([]string, *apierror.Error) {
	switch {
	case obj.GetPool() != nil:
		warnings, aerr := a.poolWarnings(obj.GetPool())
		if aerr != nil {
			return nil, aerr
		}
		warnings = append(warnings, nodeLabelWarnings(obj.GetPool())...)
		return append(warnings, remediationWarnings(obj.GetPool())...), nil
	case obj.GetMachineClass() != nil:
		return selectorWarnings(obj.GetMachineClass()), nil
	case obj.GetMaintenanceWindow() != nil:
		return a.windowWarnings(obj.GetMaintenanceWindow())
	case obj.GetReleaseFeed() != nil:
		return a.feedWarnings(obj.GetReleaseFeed())
	}
	return nil, nil
}

// feedWarnings warns about a feed read over plain HTTP (spec.insecure),
// and one no trusted key can sign for (nothing would be imported).
func (a *applier) feedWarnings(f *roostv1.ReleaseFeed) ([]string, *apierror.Error) {
	var out []string
	name := f.GetMetadata().GetName()
	if k, _, err := resource.ParseFeedURL(f.GetSpec().GetUrl()); err == nil && k == resource.FeedHTTP {
		out = append(out, fmt.Sprintf("releasefeed/%s: %s is plain HTTP (spec.insecure): anyone on the path can withhold or delay releases; "+
			"their signatures are still checked", name, f.GetSpec().GetUrl()))
	}
	trusted, aerr := a.trustedKeysIn()
	if aerr != nil {
		return nil, aerr
	}
	if _, err := FeedKeys(trusted, f.GetSpec()); err != nil {
		out = append(out, fmt.Sprintf("releasefeed/%s: nothing will be imported until a key is trusted: %v", name, err))
	}
	return out, nil
}

// windowWarnings warns about a window whose rule has ended (UNTIL or COUNT
// passed) or whose current opening is its last.
func (a *applier) windowWarnings(mw *roostv1.MaintenanceWindow) ([]string, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	w, err := window.Parse(mw.GetSpec())
	if err != nil {
		return nil, nil // refused at the edge
	}
	t := now.AsTime()
	cur, open := w.OpenAt(t)
	from := t
	if open {
		from = cur.End
	}
	if len(w.Next(from, 1)) > 0 {
		return nil, nil
	}
	name := mw.GetMetadata().GetName()
	const fix = "Pools listing only this window will not upgrade after that (extend spec.rrule, or list another window in the Pools)"
	if open {
		return []string{fmt.Sprintf("maintenancewindow/%s: its current opening, until %s, is its last: spec.rrule ends (UNTIL or COUNT); %s",
			name, cur.End.UTC().Format(time.RFC3339), fix)}, nil
	}
	return []string{fmt.Sprintf("maintenancewindow/%s: has no opening after %s: spec.rrule ends (its UNTIL or COUNT has passed); %s",
		name, t.UTC().Format(time.RFC3339), fix)}, nil
}

func (a *applier) poolWarnings(p *roostv1.Pool) ([]string, *apierror.Error) {
	name, spec := p.GetMetadata().GetName(), p.GetSpec()
	var warnings []string
	switch v, ch := spec.GetImageVersion(), spec.GetImageChannel(); {
	case v != "": // a pin wins over a channel
		ok, aerr := a.releaseExists(v)
		if aerr != nil {
			return nil, aerr
		}
		if !ok {
			warnings = append(warnings, fmt.Sprintf("pool/%s: no ImageRelease has version %s yet: its Machines install nothing until it is pushed ('roostctl image push')", name, v))
		}
	case ch != "":
		ok, aerr := a.channelHasRelease(ch)
		if aerr != nil {
			return nil, aerr
		}
		if !ok {
			warnings = append(warnings, fmt.Sprintf("pool/%s: no ImageRelease is on channel %s yet: its Machines install nothing until one is promoted ('roostctl image promote VERSION --channel %s')", name, ch, ch))
		}
	}
	if ws := spec.GetMaintenanceWindows(); len(ws) > 0 {
		opens := false
		for _, w := range ws {
			raw, err := a.txn.First("MaintenanceWindow", indexID, w)
			if err != nil {
				return nil, internal(err)
			}
			if raw == nil {
				return warnings, nil // refused as a missing reference
			}
			var aerr *apierror.Error
			if opens, aerr = a.opensAgain(raw.(*roostv1.Object).GetMaintenanceWindow()); aerr != nil || opens {
				return warnings, aerr
			}
		}
		warnings = append(warnings, fmt.Sprintf("pool/%s: none of its maintenance windows (%s) opens again: its rollouts will wait forever "+
			"(list a window that opens again in spec.maintenanceWindows)", name, strings.Join(ws, ", ")))
	}
	return warnings, nil
}

// opensAgain says whether mw opens at or after the command's time. A spec
// window.Parse refuses (validated at the edge, so not expected) counts as
// opening: its problems are reported elsewhere.
func (a *applier) opensAgain(mw *roostv1.MaintenanceWindow) (bool, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return false, aerr
	}
	w, err := window.Parse(mw.GetSpec())
	if err != nil {
		return true, nil
	}
	t := now.AsTime()
	if _, open := w.OpenAt(t); open {
		return true, nil
	}
	return len(w.Next(t, 1)) > 0, nil
}

// channelHasRelease says whether any ImageRelease is on channel ch.
func (a *applier) channelHasRelease(ch string) (bool, *apierror.Error) {
	return a.anyRelease(func(r *roostv1.ImageReleaseSpec) bool { return slices.Contains(r.GetChannels(), ch) })
}
