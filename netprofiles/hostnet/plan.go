package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/roostfleet/roost/netprofiles"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Op says what an action does to its object, as in a terraform plan.
type Op string

// The operations.
const (
	OpCreate Op = "+"
	OpDelete Op = "-"
	OpChange Op = "~"
)

// Action is one step of a plan: a change of one link, address or route.
type Action struct {
	Op Op
	// Text says what the action does, e.g. "create bond bond0 (802.3ad,
	// miimon 100)" or "set mtu 9000 on eth0".
	Text string
	do   func(Netlink) error
}

// String renders the action like a terraform plan line: "+ create bond
// bond0 (802.3ad, miimon 100)".
func (a Action) String() string { return string(a.Op) + " " + a.Text }

// Do carries the action out.
func (a Action) Do(nl Netlink) error { return a.do(nl) }

// Option tunes Plan and Apply.
type Option func(*options)

type options struct {
	profile   string
	physTypes []string
}

// WithPhysicalTypes sets the netlink link types a profile link may bind
// to; by default only "device", a NIC. Tests that stand veth pairs in for
// NICs add "veth".
func WithPhysicalTypes(types ...string) Option { return func(o *options) { o.physTypes = types } }

// WithProfile names the profile being applied; links Roost creates get the
// alias "roost:<name>". Without it the alias is "roost:profile".
func WithProfile(name string) Option { return func(o *options) { o.profile = name } }

// PlanError lists what a plan cannot do: links the host lacks, names
// taken by links Roost does not own, steps the kernel would refuse. The
// plan's actions still do everything else.
type PlanError struct{ Problems []string }

func (e *PlanError) Error() string {
	return "the profile cannot be applied in full:\n  " + strings.Join(e.Problems, "\n  ")
}

// Plan returns the ordered actions that take a host from state h to the
// profile. It never touches the host: it runs every action against an
// in-memory copy (SimKernel) so that later steps see the effects of earlier
// ones (a bond member takes the bond's MTU, a link set down loses its
// routes, …). The order:
//
//  1. delete Roost-owned links that are not in the profile, or whose kind
//     or fixed options (bond mode, VLAN id, …) differ: dependents first;
//  2. release profile links from a master they should not have;
//  3. rename matched physical links to their profile names (down first);
//  4. bonds: create, set MTU, then enslave members (each set down first);
//  5. MTUs of links;
//  6. VLANs on links and bonds;
//  7. bridges: create, add ports, set MTU;
//  8. VLANs on bridges;
//  9. set every profile interface up, parents first;
//  10. addresses: delete the unwanted, add the missing;
//  11. routes: delete Roost's unwanted ones, add the missing.
//
// Profile links bind to host links by their match (MAC, name glob,
// driver, PCI path; a link already renamed to its profile name matches
// too). Links Roost did not create and the profile does not name are never
// changed, nor are their addresses or routes. err, a *PlanError, lists what
// could not be planned; the actions are valid either way.
func Plan(spec *roostv1.NetworkProfileSpec, h HostState, opts ...Option) ([]Action, error) {
	if vs := netprofiles.Validate(spec); len(vs) > 0 {
		msgs := make([]string, len(vs))
		for i, v := range vs {
			msgs[i] = v.String()
		}
		return nil, fmt.Errorf("invalid network profile:\n  %s", strings.Join(msgs, "\n  "))
	}
	o := options{profile: "profile", physTypes: []string{"device"}}
	for _, f := range opts {
		f(&o)
	}
	p := &planner{spec: spec, aliasName: AliasPrefix + o.profile, physTypes: o.physTypes, sim: SimKernelFromState(h), host: map[string]string{}, mtuUnknown: map[int]bool{}, blocked: map[string]bool{}}
	p.run(h)
	if len(p.problems) > 0 {
		return p.actions, &PlanError{Problems: p.problems}
	}
	return p.actions, nil
}

type planner struct {
	physTypes []string
	spec      *roostv1.NetworkProfileSpec
	aliasName string
	sim       *SimKernel
	actions   []Action
	problems  []string
	// mtuUnknown holds the indexes of links released from a bond during
	// the plan: the kernel gives them back the MTU they had before they
	// were enslaved, which observation cannot tell, so their MTU is set
	// whenever the profile gives one.
	mtuUnknown map[int]bool
	// blocked holds profile interface names taken by links Roost does not
	// own: the plan leaves them alone.
	blocked map[string]bool
	// host maps a profile link's name to the host link it binds to (its
	// name before any rename).
	host map[string]string
}

func (p *planner) problem(format string, a ...any) {
	p.problems = append(p.problems, fmt.Sprintf(format, a...))
}

func (p *planner) state() HostState {
	h, _ := Observe(p.sim)
	return h
}

// emit runs fn on the simulation and records the action when it works.
func (p *planner) emit(op Op, text string, fn func(Netlink) error) bool {
	if err := fn(p.sim); err != nil {
		p.problem("%s %s: the kernel would refuse: %v", op, text, err)
		return false
	}
	p.actions = append(p.actions, Action{Op: op, Text: text, do: fn})
	return true
}

// onLink runs fn with the link named name, looked up when it runs.
func onLink(name string, fn func(nl Netlink, l Link) error) func(Netlink) error {
	return func(nl Netlink) error {
		l, err := nl.LinkByName(name)
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		return fn(nl, l)
	}
}

func (p *planner) run(h HostState) {
	p.bind(h)
	ifs := netprofiles.Interfaces(p.spec)
	kinds := map[string]netprofiles.Kind{}
	for _, it := range ifs {
		kinds[it.Name] = it.Kind
	}
	p.deletions(ifs)
	p.detach(ifs)
	p.renames()
	for _, b := range p.spec.GetBonds() {
		p.bond(b)
	}
	for _, l := range p.spec.GetLinks() {
		if _, ok := p.host[l.GetName()]; ok {
			p.mtu(l.GetName(), l.GetMtu())
		}
	}
	for _, v := range p.spec.GetVlans() {
		if kinds[v.GetLink()] != netprofiles.KindBridge {
			p.vlan(v)
		}
	}
	for _, br := range p.spec.GetBridges() {
		p.bridge(br)
	}
	for _, v := range p.spec.GetVlans() {
		if kinds[v.GetLink()] == netprofiles.KindBridge {
			p.vlan(v)
		}
	}
	p.ups(ifs, kinds)
	p.addresses(ifs)
	p.routes(ifs)
}

// candidate says whether Roost may bind a profile link to host link l: a
// link of a physical type, not Roost's own, not the loopback.
func (p *planner) candidate(l *LinkState) bool {
	return !l.Owned() && l.Name != "lo" && slices.Contains(p.physTypes, l.Type)
}

// RenamedAliasPrefix starts the alias Roost gives a physical link it
// renames: "roost-was:<original name>", so that a name glob in the match
// still finds the link after the rename. (It is not AliasPrefix: Roost
// does not own the link and never deletes it.)
const RenamedAliasPrefix = "roost-was:"

// OriginalName is the name a link had before Roost renamed it: the one
// its alias records, else its name.
func (l *LinkState) OriginalName() string {
	if n, ok := strings.CutPrefix(l.Alias, RenamedAliasPrefix); ok && n != "" {
		return n
	}
	return l.Name
}

// Matches says whether host link l satisfies a profile link's match. The
// name glob applies to the link's name, or to its name before Roost
// renamed it.
func Matches(m *roostv1.LinkMatch, l *LinkState) bool {
	if mac := m.GetMac(); mac != "" {
		want, err := net.ParseMAC(mac)
		got, err2 := net.ParseMAC(l.MAC)
		if err != nil || err2 != nil || want.String() != got.String() {
			return false
		}
	}
	if g := m.GetName(); g != "" {
		ok, _ := path.Match(g, l.Name)
		was, _ := path.Match(g, l.OriginalName())
		if !ok && !was {
			return false
		}
	}
	if d := m.GetDriver(); d != "" && d != l.Driver {
		return false
	}
	if pci := m.GetPciPath(); pci != "" && pci != l.PCIPath {
		return false
	}
	return true
}

func matchText(m *roostv1.LinkMatch) string {
	var parts []string
	for _, kv := range [][2]string{{"mac", m.GetMac()}, {"name", m.GetName()}, {"driver", m.GetDriver()}, {"pciPath", m.GetPciPath()}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	return strings.Join(parts, ", ")
}

// bind maps profile links to host links.
func (p *planner) bind(h HostState) {
	taken := map[string]string{}
	for _, pl := range p.spec.GetLinks() {
		var found []*LinkState
		for i := range h.Links {
			if l := &h.Links[i]; p.candidate(l) && Matches(pl.GetMatch(), l) {
				found = append(found, l)
			}
		}
		if len(found) > 1 {
			if i := slices.IndexFunc(found, func(l *LinkState) bool { return l.Name == pl.GetName() }); i >= 0 {
				found = found[i : i+1]
			}
		}
		switch {
		case len(found) == 0:
			p.problem("link %s: no host link matches (%s)", pl.GetName(), matchText(pl.GetMatch()))
		case len(found) > 1:
			names := make([]string, len(found))
			for i, l := range found {
				names[i] = l.Name
			}
			p.problem("link %s: %d host links match (%s): %s; make the match narrower", pl.GetName(), len(found), matchText(pl.GetMatch()), strings.Join(names, ", "))
		case taken[found[0].Name] != "":
			p.problem("link %s: host link %s is already bound to profile link %s", pl.GetName(), found[0].Name, taken[found[0].Name])
		default:
			taken[found[0].Name] = pl.GetName()
			p.host[pl.GetName()] = found[0].Name
		}
	}
}

// wantVirtual says whether the owned link l is what the profile wants
// under its name; why says what differs.
func (p *planner) wantVirtual(l *LinkState, ifs []netprofiles.Iface) (ok bool, why string) {
	i := slices.IndexFunc(ifs, func(it netprofiles.Iface) bool { return it.Name == l.Name })
	if i < 0 {
		return false, ""
	}
	it := ifs[i]
	switch it.Kind {
	case netprofiles.KindBond:
		if l.Bond == nil {
			return false, "kind differs"
		}
		b := it.Bond
		switch {
		case l.Bond.Mode != b.GetMode():
			return false, "mode differs"
		case b.GetMiimon() != 0 && l.Bond.Miimon != int(b.GetMiimon()):
			return false, "miimon differs"
		case b.GetMode() == "802.3ad" && l.Bond.LacpRate != or(b.GetLacpRate(), "slow"):
			return false, "lacp rate differs"
		case l.Bond.XmitHashPolicy != or(b.GetXmitHashPolicy(), "layer2"):
			return false, "xmit hash policy differs"
		case l.Bond.Primary != p.primary(b):
			return false, "primary differs"
		}
	case netprofiles.KindVlan:
		if l.Vlan == nil {
			return false, "kind differs"
		}
		if l.Vlan.ID != int(it.Vlan.GetId()) || l.Vlan.Link != it.Vlan.GetLink() {
			return false, "id or link differs"
		}
	case netprofiles.KindBridge:
		if l.Bridge == nil {
			return false, "kind differs"
		}
		if l.Bridge.VlanFiltering != it.Bridge.GetVlanFiltering() {
			return false, "vlan filtering differs"
		}
	default:
		return false, "the profile names a physical link " + l.Name
	}
	return true, ""
}

// depth is a link's distance from the bottom of the stack (physical
// links 0): deletions go from the top.
func depth(h HostState, name string, seen map[string]bool) int {
	if seen[name] {
		return 0
	}
	seen[name] = true
	l := h.Link(name)
	if l == nil {
		return 0
	}
	d := 0
	if l.Vlan != nil {
		d = max(d, depth(h, l.Vlan.Link, seen)+1)
	}
	for _, o := range h.Links {
		if o.Master == name {
			d = max(d, depth(h, o.Name, seen)+1)
		}
	}
	return d
}

func (p *planner) deletions(ifs []netprofiles.Iface) {
	h := p.state()
	type del struct {
		name, typ, why string
		d              int
	}
	var dels []del
	for _, l := range h.Links {
		if !l.Owned() {
			// A name the profile needs, held by a link Roost does not own.
			if i := slices.IndexFunc(ifs, func(it netprofiles.Iface) bool { return it.Name == l.Name }); i >= 0 && ifs[i].Kind != netprofiles.KindLink {
				if !slices.Contains(mapValues(p.host), l.Name) {
					p.blocked[l.Name] = true
					p.problem("%s %s: the name is taken by a %s Roost did not create; Roost leaves it alone", ifs[i].Kind, l.Name, l.Type)
				}
			}
			continue
		}
		ok, why := p.wantVirtual(&l, ifs)
		if ok {
			continue
		}
		if why != "" {
			why = " (to replace it: " + why + ")"
		}
		dels = append(dels, del{l.Name, l.Type, why, depth(h, l.Name, map[string]bool{})})
	}
	slices.SortStableFunc(dels, func(a, b del) int {
		if a.d != b.d {
			return b.d - a.d
		}
		return strings.Compare(a.name, b.name)
	})
	for _, d := range dels {
		p.markReleased(d.name)
		p.emit(OpDelete, fmt.Sprintf("delete %s %s%s", d.typ, d.name, d.why), onLink(d.name, func(nl Netlink, l Link) error {
			return nl.LinkDel(l)
		}))
	}
}

// primary is the bond's wanted primary: none while that member is
// missing from the host (the plan reports the missing link).
func (p *planner) primary(b *roostv1.Bond) string {
	if _, ok := p.host[b.GetPrimary()]; !ok {
		return ""
	}
	return b.GetPrimary()
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// masters returns each profile interface's wanted master.
func (p *planner) masters() map[string]string {
	m := map[string]string{}
	for _, b := range p.spec.GetBonds() {
		for _, x := range b.GetMembers() {
			m[x] = b.GetName()
		}
	}
	for _, br := range p.spec.GetBridges() {
		for _, x := range br.GetPorts() {
			m[x] = br.GetName()
		}
	}
	return m
}

// current returns the host name of a profile interface now: the bound
// host link's name for links (before renames), the name itself otherwise.
func (p *planner) current(name string, kind netprofiles.Kind) (string, bool) {
	if kind == netprofiles.KindLink {
		n, ok := p.host[name]
		return n, ok
	}
	return name, true
}

func (p *planner) detach(ifs []netprofiles.Iface) {
	want := p.masters()
	h := p.state()
	for _, it := range ifs {
		cur, ok := p.current(it.Name, it.Kind)
		if !ok {
			continue
		}
		l := h.Link(cur)
		if l == nil || l.Master == "" || l.Master == want[it.Name] {
			continue
		}
		if m := h.Link(l.Master); m != nil && m.Type == "bond" {
			p.mtuUnknown[l.Index] = true
		}
		p.emit(OpChange, fmt.Sprintf("release %s from %s", cur, l.Master), onLink(cur, func(nl Netlink, l Link) error {
			return nl.LinkSetNoMaster(l)
		}))
	}
}

func (p *planner) renames() {
	var todo []string
	for _, l := range p.spec.GetLinks() {
		if cur, ok := p.host[l.GetName()]; ok && cur != l.GetName() {
			todo = append(todo, l.GetName())
		}
	}
	for len(todo) > 0 {
		progress := false
		for i := 0; i < len(todo); i++ {
			name := todo[i]
			cur := p.host[name]
			if p.state().Link(name) != nil {
				continue
			}
			if l := p.state().Link(cur); l != nil && l.Up {
				p.emit(OpChange, fmt.Sprintf("set %s down (to rename it)", cur), onLink(cur, func(nl Netlink, l Link) error {
					return nl.LinkSetDown(l)
				}))
			}
			was := RenamedAliasPrefix + p.state().Link(cur).OriginalName()
			if name == p.state().Link(cur).OriginalName() {
				was = "" // back to its own name
			}
			p.emit(OpChange, fmt.Sprintf("rename %s to %s", cur, name), onLink(cur, func(nl Netlink, l Link) error {
				if err := nl.LinkSetName(l, name); err != nil {
					return err
				}
				if l.Attrs().Alias == was {
					return nil
				}
				return nl.LinkSetAlias(l, was)
			}))
			todo = slices.Delete(todo, i, i+1)
			i--
			progress = true
		}
		if !progress {
			for _, name := range todo {
				p.problem("link %s: cannot rename %s, the name is taken", name, p.host[name])
				delete(p.host, name)
			}
			return
		}
	}
}

// exists says whether a profile interface is on the (simulated) host now.
func (p *planner) exists(name string, kind netprofiles.Kind) bool {
	if p.blocked[name] {
		return false
	}
	if kind == netprofiles.KindLink {
		if _, ok := p.host[name]; !ok {
			return false
		}
	}
	return p.state().Link(name) != nil
}

func (p *planner) alias(name string) {
	if l := p.state().Link(name); l != nil && l.Alias != p.aliasName {
		p.emit(OpChange, fmt.Sprintf("set alias %s on %s", p.aliasName, name), onLink(name, func(nl Netlink, l Link) error {
			return nl.LinkSetAlias(l, p.aliasName)
		}))
	}
}

// create adds a link and marks it as Roost's: the kernel refuses
// IFLA_IFALIAS in a create request (EOPNOTSUPP), so the alias follows.
func (p *planner) create(nl Netlink, l Link) error {
	if err := nl.LinkAdd(l); err != nil {
		return err
	}
	got, err := nl.LinkByName(l.Attrs().Name)
	if err != nil {
		return err
	}
	return nl.LinkSetAlias(got, p.aliasName)
}

// markReleased notes the members of a bond about to be deleted.
func (p *planner) markReleased(master string) {
	h := p.state()
	if m := h.Link(master); m == nil || m.Type != "bond" {
		return
	}
	for _, l := range h.Links {
		if l.Master == master {
			p.mtuUnknown[l.Index] = true
		}
	}
}

func (p *planner) mtu(name string, mtu uint32) {
	if l := p.state().Link(name); l != nil && mtu != 0 && (l.MTU != int(mtu) || p.mtuUnknown[l.Index]) {
		delete(p.mtuUnknown, l.Index)
		p.emit(OpChange, fmt.Sprintf("set mtu %d on %s", mtu, name), onLink(name, func(nl Netlink, l Link) error {
			return nl.LinkSetMTU(l, int(mtu))
		}))
	}
}

func (p *planner) enslave(name, master string) {
	l := p.state().Link(name)
	if l == nil || l.Master == master {
		return
	}
	if l.Up && p.state().Link(master).Type == "bond" {
		p.emit(OpChange, fmt.Sprintf("set %s down (to enslave it)", name), onLink(name, func(nl Netlink, l Link) error {
			return nl.LinkSetDown(l)
		}))
	}
	word := "add port %s to %s"
	if p.state().Link(master).Type == "bond" {
		word = "enslave %s to %s"
	}
	p.emit(OpChange, fmt.Sprintf(word, name, master), func(nl Netlink) error {
		l, err := nl.LinkByName(name)
		if err != nil {
			return err
		}
		m, err := nl.LinkByName(master)
		if err != nil {
			return err
		}
		return nl.LinkSetMaster(l, m)
	})
}

func bondText(b *roostv1.Bond) string {
	s := &BondState{Mode: b.GetMode(), Miimon: int(b.GetMiimon()), LacpRate: b.GetLacpRate(), XmitHashPolicy: b.GetXmitHashPolicy(), Primary: b.GetPrimary()}
	d := bondDesc(s)
	if b.GetMtu() != 0 {
		d += fmt.Sprintf(", mtu %d", b.GetMtu())
	}
	return d
}

func (p *planner) bond(b *roostv1.Bond) {
	name := b.GetName()
	if p.blocked[name] {
		return
	}
	if !p.exists(name, netprofiles.KindBond) {
		p.emit(OpCreate, fmt.Sprintf("create bond %s (%s)", name, bondText(b)), func(nl Netlink) error {
			nb := &Bond{LinkAttrs: LinkAttrs{Name: name, MTU: int(b.GetMtu())}, Mode: b.GetMode(), Miimon: int(b.GetMiimon()),
				LacpRate: b.GetLacpRate(), XmitHashPolicy: b.GetXmitHashPolicy()}
			if pr := p.primary(b); pr != "" {
				if l, err := nl.LinkByName(pr); err == nil {
					nb.Primary = l.Attrs().Index
				}
			}
			return p.create(nl, nb)
		})
	} else {
		p.alias(name)
		p.mtu(name, b.GetMtu())
	}
	for _, m := range b.GetMembers() {
		if p.exists(m, netprofiles.KindLink) {
			p.enslave(m, name)
		}
	}
}

func (p *planner) vlan(v *roostv1.Vlan) {
	name := v.GetName()
	if p.blocked[name] {
		return
	}
	if p.exists(name, netprofiles.KindVlan) {
		p.alias(name)
		p.mtu(name, v.GetMtu())
		return
	}
	if p.state().Link(v.GetLink()) == nil {
		p.problem("vlan %s: its link %s is not on the host", name, v.GetLink())
		return
	}
	text := fmt.Sprintf("create vlan %s (id %d on %s", name, v.GetId(), v.GetLink())
	if v.GetMtu() != 0 {
		text += fmt.Sprintf(", mtu %d", v.GetMtu())
	}
	p.emit(OpCreate, text+")", onLink(v.GetLink(), func(nl Netlink, parent Link) error {
		return p.create(nl, &Vlan{LinkAttrs: LinkAttrs{Name: name, MTU: int(v.GetMtu()),
			ParentIndex: parent.Attrs().Index}, VlanID: int(v.GetId())})
	}))
}

func (p *planner) bridge(br *roostv1.Bridge) {
	name := br.GetName()
	if p.blocked[name] {
		return
	}
	if !p.exists(name, netprofiles.KindBridge) {
		text := "create bridge " + name
		if br.GetVlanFiltering() {
			text += " (vlan-filtering)"
		}
		p.emit(OpCreate, text, func(nl Netlink) error {
			nb := &Bridge{LinkAttrs: LinkAttrs{Name: name}}
			if br.GetVlanFiltering() {
				// Only when wanted: a kernel without VLAN filtering refuses
				// the attribute even when it says "off".
				vf := true
				nb.VlanFiltering = &vf
			}
			return p.create(nl, nb)
		})
	} else {
		p.alias(name)
	}
	if l := p.state().Link(name); l != nil && l.Bridge != nil && l.Bridge.STP != br.GetStp() {
		word := "disable"
		if br.GetStp() {
			word = "enable"
		}
		p.emit(OpChange, fmt.Sprintf("%s stp on %s", word, name), func(nl Netlink) error {
			b, ok := nl.(BridgeSTP)
			if !ok {
				return fmt.Errorf("%T cannot set a bridge's STP", nl)
			}
			return b.SetBridgeSTP(name, br.GetStp())
		})
	}
	kinds := map[string]netprofiles.Kind{}
	for _, it := range netprofiles.Interfaces(p.spec) {
		kinds[it.Name] = it.Kind
	}
	for _, port := range br.GetPorts() {
		if p.exists(port, kinds[port]) {
			p.enslave(port, name)
		}
	}
	p.mtu(name, br.GetMtu())
}

func (p *planner) ups(ifs []netprofiles.Iface, kinds map[string]netprofiles.Kind) {
	order := func(it netprofiles.Iface) int {
		switch it.Kind {
		case netprofiles.KindLink:
			return 0
		case netprofiles.KindBond:
			return 1
		case netprofiles.KindVlan:
			if kinds[it.Vlan.GetLink()] == netprofiles.KindBridge {
				return 4
			}
			return 2
		}
		return 3
	}
	sorted := slices.Clone(ifs)
	slices.SortStableFunc(sorted, func(a, b netprofiles.Iface) int { return order(a) - order(b) })
	for _, it := range sorted {
		if !p.exists(it.Name, it.Kind) {
			continue
		}
		if l := p.state().Link(it.Name); !l.Up {
			p.emit(OpChange, fmt.Sprintf("set %s up", it.Name), onLink(it.Name, func(nl Netlink, l Link) error {
				return nl.LinkSetUp(l)
			}))
		}
	}
}

func (p *planner) addresses(ifs []netprofiles.Iface) {
	for _, it := range ifs {
		if !p.exists(it.Name, it.Kind) {
			continue
		}
		var want []netip.Prefix
		for _, a := range it.Addresses {
			if pf, err := netip.ParsePrefix(a); err == nil {
				want = append(want, pf)
			}
		}
		l := p.state().Link(it.Name)
		for _, a := range l.Addrs {
			keep := slices.Contains(want, a.Prefix) || a.Prefix.Addr().IsLinkLocalUnicast() ||
				(a.Dynamic && a.Prefix.Addr().Is4() && it.DHCP4) || (a.Dynamic && a.Prefix.Addr().Is6() && it.DHCP6)
			if keep {
				continue
			}
			pf := a.Prefix
			p.emit(OpDelete, fmt.Sprintf("delete address %s from %s", pf, it.Name), onLink(it.Name, func(nl Netlink, l Link) error {
				return nl.AddrDel(l, &Addr{Prefix: pf})
			}))
		}
		for _, pf := range want {
			if slices.ContainsFunc(l.Addrs, func(a AddrState) bool { return a.Prefix == pf }) {
				continue
			}
			p.emit(OpCreate, fmt.Sprintf("add address %s to %s", pf, it.Name), onLink(it.Name, func(nl Netlink, l Link) error {
				return nl.AddrAdd(l, &Addr{Prefix: pf})
			}))
		}
	}
}

// desiredRoutes lists the profile's routes as the kernel will show them.
func (p *planner) desiredRoutes(ifs []netprofiles.Iface) []RouteState {
	var out []RouteState
	for _, it := range ifs {
		if !p.exists(it.Name, it.Kind) {
			continue
		}
		for _, r := range it.Routes {
			dst, gw, ok := netprofiles.ParseRoute(r)
			if !ok {
				continue
			}
			rs := RouteState{Dst: dst, Gw: gw, Dev: it.Name, Metric: int(r.GetMetric()), Table: int(r.GetTable()), Protocol: RouteProtocol}
			if rs.Table == 0 {
				rs.Table = mainTable
			}
			if dst.Addr().Is6() && rs.Metric == 0 {
				rs.Metric = 1024
			}
			out = append(out, rs)
		}
	}
	return out
}

func (p *planner) routes(ifs []netprofiles.Iface) {
	want := p.desiredRoutes(ifs)
	h := p.state()
	for _, r := range h.Routes {
		if r.Protocol != RouteProtocol || slices.ContainsFunc(want, func(w RouteState) bool { return w.key() == r.key() }) {
			continue
		}
		p.emit(OpDelete, "delete "+routeText(r), routeDo(r, false))
	}
	h = p.state()
	for _, w := range want {
		if slices.ContainsFunc(h.Routes, func(r RouteState) bool { return r.key() == w.key() }) {
			continue
		}
		if i := slices.IndexFunc(h.Routes, func(r RouteState) bool {
			return r.Dst == w.Dst && r.Table == w.Table && r.Metric == w.Metric
		}); i >= 0 {
			p.problem("%s: conflicts with %s, which Roost did not add", routeText(w), routeText(h.Routes[i]))
			continue
		}
		p.emit(OpCreate, "add "+routeText(w), routeDo(w, true))
	}
}

func routeText(r RouteState) string {
	s := r.String()
	return strings.TrimSuffix(s, " proto roost")
}

func routeDo(r RouteState, add bool) func(Netlink) error {
	return onLink(r.Dev, func(nl Netlink, l Link) error {
		nr := &Route{LinkIndex: l.Attrs().Index, Dst: r.Dst, Gw: r.Gw, Metric: r.Metric, Table: r.Table, Protocol: r.Protocol,
			Family: FamilyV4}
		if r.Dst.Addr().Is6() {
			nr.Family = FamilyV6
		}
		if add {
			return nl.RouteAdd(nr)
		}
		return nl.RouteDel(nr)
	})
}

// IsPlanError says whether err is (or wraps) a *PlanError.
func IsPlanError(err error) bool {
	var pe *PlanError
	return errors.As(err, &pe)
}
