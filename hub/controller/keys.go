package controller

import (
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// ByName is a Source.Keys that keys each event by its object's name.
func ByName(ev *roostv1.WatchEvent) []string {
	if n := resource.NameOf(ev.GetObject()); n != "" {
		return []string{n}
	}
	return nil
}

// Names returns the names of objs, for ResyncKeys and Source.Keys that
// fan an event out to every object of a kind.
func Names(objs []*roostv1.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, resource.NameOf(o))
	}
	return out
}
