package agent

import (
	"math/rand/v2"
	"slices"

	"github.com/roostfleet/roost/agent/config"
)

// setHubs sets the try order: the hub's own list (from) followed by the
// configured addresses it lacks, each part in the Server's order of
// preference (rendezvousOrder) once enrolled, shuffled before, so that
// agents spread over the members. Malformed addresses from the hub are
// dropped.
func (a *Agent) setHubs(from []string) {
	var members, extra []string
	for i, h := range append(slices.Clone(from), a.o.Hubs...) {
		if config.ValidateHubs([]string{h}) != nil || slices.Contains(members, h) || slices.Contains(extra, h) {
			continue
		}
		if i < len(from) {
			members = append(members, h)
		} else {
			extra = append(extra, h)
		}
	}
	key := a.state.ServerName
	var order []string
	if key != "" {
		order = append(rendezvousOrder(key, members), rendezvousOrder(key, extra)...)
	} else {
		order = append(members, extra...)
		if slices.Equal(sorted(order), sorted(a.hubs)) {
			return
		}
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	if slices.Equal(order, a.hubs) && a.ranked == (key != "") {
		return
	}
	a.hubsMu.Lock()
	a.hubs, a.next, a.ranked = order, 0, key != ""
	a.hubsMu.Unlock()
}

// learnHubs keeps the hub members' API addresses the hub sent
// (HubMembers) in the state dir and tries them on the next reconnect, so
// members that joined after enrollment are used when others fail. A list
// with an invalid address is ignored.
func (a *Agent) learnHubs(hubs []string) {
	if len(hubs) == 0 || slices.Equal(sorted(hubs), sorted(a.state.Hubs)) {
		return
	}
	if err := config.ValidateHubs(hubs); err != nil {
		a.log.Warn("ignoring the hub's member list", "err", err)
		return
	}
	st := a.state
	st.Hubs = slices.Clone(hubs)
	if err := a.o.Store.SaveState(st); err != nil {
		a.log.Warn("cannot save the hub's member list", "err", err)
		return
	}
	a.state = st
	a.setHubs(st.Hubs)
	a.log.Info("hub members changed", "hubs", hubs)
}

// hubList returns the hubs in try order, starting with the current one.
func (a *Agent) hubList() []string {
	a.hubsMu.Lock()
	defer a.hubsMu.Unlock()
	out := make([]string, 0, len(a.hubs))
	for i := range a.hubs {
		out = append(out, a.hubs[(a.next+i)%len(a.hubs)])
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func (a *Agent) currentHub() string { return a.hubs[a.next%len(a.hubs)] }

// setCurrent makes the hub after hub (skip 1) or hub itself (skip 0) the
// current one; when hub is no longer listed, the current one stays.
func (a *Agent) setCurrent(hub string, skip int) {
	a.hubsMu.Lock()
	defer a.hubsMu.Unlock()
	if i := slices.Index(a.hubs, hub); i >= 0 {
		a.next = (i + skip) % len(a.hubs)
	}
}
