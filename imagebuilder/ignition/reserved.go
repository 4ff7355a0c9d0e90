package ignition

import (
	"fmt"
	"path"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3/types"
)

// UnitDir is where Ignition writes systemd units and their drop-ins.
const UnitDir = "/etc/systemd/system"

// Reserved is what a snippet may not write: what Roost writes itself, and
// places where what Ignition writes would not survive the boot. It holds
// paths (of files, directories and links: one path, a directory and all
// under it, or every path starting with a prefix) and systemd units by
// name (a snippet may not give their contents, mask or enable them, nor
// write their unit file; it may add drop-ins, unless a drop-in's path is
// reserved). The zero Reserved reserves nothing; use the methods to add.
type Reserved struct {
	paths []reservedPath
	units []reservedUnit
}

type matchKind int

const (
	matchExact  matchKind = iota
	matchTree             // the path and everything under it
	matchPrefix           // every path starting with the string
)

type reservedPath struct {
	path      string
	match     matchKind
	why, hint string
}

type reservedUnit struct {
	name   string
	prefix bool
	why    string
}

// Path reserves one path; why completes `"<path>": …` in the refusal,
// hint says what to do instead ("" for the default).
func (r *Reserved) Path(p, why, hint string) *Reserved {
	r.paths = append(r.paths, reservedPath{path: p, why: why, hint: hint})
	return r
}

// Tree reserves directory dir and everything under it.
func (r *Reserved) Tree(dir, why, hint string) *Reserved {
	r.paths = append(r.paths, reservedPath{path: strings.TrimSuffix(dir, "/"), match: matchTree, why: why, hint: hint})
	return r
}

// Prefix reserves every path that starts with prefix.
func (r *Reserved) Prefix(prefix, why, hint string) *Reserved {
	r.paths = append(r.paths, reservedPath{path: prefix, match: matchPrefix, why: why, hint: hint})
	return r
}

// Unit reserves systemd unit name; a name ending in "*" reserves every
// unit whose name starts with what comes before it.
func (r *Reserved) Unit(name, why string) *Reserved {
	p, prefix := strings.CutSuffix(name, "*")
	r.units = append(r.units, reservedUnit{name: p, prefix: prefix, why: why})
	return r
}

// DropIn reserves drop-in file of unit (UnitDir/unit.d/file).
func (r *Reserved) DropIn(unit, file, why string) *Reserved {
	return r.Path(UnitDir+"/"+unit+".d/"+file, why, "give your drop-in another name")
}

// With returns a Reserved holding both r's and o's reservations (either
// may be nil).
func (r *Reserved) With(o *Reserved) *Reserved {
	out := &Reserved{}
	for _, x := range []*Reserved{r, o} {
		if x != nil {
			out.paths = append(out.paths, x.paths...)
			out.units = append(out.units, x.units...)
		}
	}
	return out
}

func (r *Reserved) path(p string) (reservedPath, bool) {
	if r == nil {
		return reservedPath{}, false
	}
	for _, x := range r.paths {
		switch {
		case x.match == matchExact && p == x.path,
			x.match == matchTree && (p == x.path || strings.HasPrefix(p, x.path+"/")),
			x.match == matchPrefix && strings.HasPrefix(p, x.path):
			return x, true
		}
	}
	return reservedPath{}, false
}

func (r *Reserved) unit(name string) (reservedUnit, bool) {
	if r == nil {
		return reservedUnit{}, false
	}
	for _, u := range r.units {
		if name == u.name || (u.prefix && strings.HasPrefix(name, u.name)) {
			return u, true
		}
	}
	return reservedUnit{}, false
}

// RevisionReserved is what a MachineClass's snippets may not write into
// its Revisions: what the hub renders in every Revision
// (hub/revisions: the agent's configuration, host name, network profile,
// a worker's kubelet, containerd and pod network, their units), what is
// mounted over at boot (the STATE partition and the bind mounts from it),
// and /usr. hub/revisions' tests check that it covers everything the hub
// renders.
func RevisionReserved() *Reserved {
	const elsewhere = "remove the entry, or write it elsewhere (under /etc, /opt or /var)"
	const hubUnit = "the hub renders it in every Revision"
	r := &Reserved{}
	r.Tree("/etc/roost", "the hub writes the agent's configuration, the Machine's facts and its network profile under /etc/roost", "remove the entry")
	r.Path("/etc/hostname", "the hub sets the host name (the Machine's spec.hostname, else its name)", "remove the entry; set the Machine's spec.hostname")
	r.Prefix("/etc/systemd/network/10-roost-", "the hub writes the 10-roost-* networkd files that keep systemd-networkd off the NetworkProfile's links",
		"remove the entry; describe host networking in the Pool's NetworkProfile")
	r.Tree("/etc/kubernetes", "the hub writes the kubelet's configuration and the cluster's CA, and the agent the bootstrap kubeconfig, under /etc/kubernetes",
		"remove the entry; the kubelet takes its settings from the Cluster and the Pool")
	r.Path("/etc/containerd/config.toml", "the hub renders containerd's configuration", "remove the entry")
	r.Path("/etc/cni/net.d/99-roost-bridge.conflist", "the hub renders the fallback pod network", "remove the entry; a network add-on's own file (e.g. 10-calico.conflist) takes precedence")
	r.Tree("/var/lib/roost", "the STATE partition is mounted on /var/lib/roost at boot and would hide it", elsewhere)
	r.Tree("/var/lib/kubelet", "/var/lib/kubelet is bind-mounted from the STATE partition at boot and would hide it", elsewhere)
	r.Tree("/var/lib/containerd", "/var/lib/containerd is bind-mounted from the STATE partition at boot and would hide it", elsewhere)
	r.Tree("/var/log/journal", "/var/log/journal is bind-mounted from the STATE partition at boot and would hide it", elsewhere)
	r.Path("/etc/systemd/journald.conf.d/10-roost.conf", "the hub keeps the journal on the STATE partition with this drop-in",
		"remove the entry; write a journald drop-in that sorts after it (e.g. 20-site.conf)")
	r.Tree("/usr", "/usr is read-only on Flatcar, and system extensions are merged over it at boot",
		"ship files under /usr as an Extension (spec.extensions), or write them under /opt or /etc")
	r.Unit("roost-*", "unit names starting with roost- are Roost's")
	for _, u := range []string{"kubelet.service", "containerd.service", "var-lib-roost.mount", "var-lib-kubelet.mount", "var-lib-containerd.mount", "var-log-journal.mount"} {
		r.Unit(u, hubUnit)
	}
	r.DropIn(AgentUnitName, "10-state.conf", "the hub writes this drop-in")
	r.DropIn("containerd.service", "10-roost.conf", "the hub writes this drop-in")
	r.DropIn("systemd-journal-flush.service", "10-roost.conf", "the hub writes this drop-in")
	return r
}

// ownReserved reserves what own (Roost's own part of a config) writes:
// its files, directories and links, its units (when it gives their
// contents or enables them) and drop-ins, and SettingsUnit.
func ownReserved(own types.Config) *Reserved {
	const why = "Roost writes it itself"
	r := &Reserved{}
	for _, f := range own.Storage.Files {
		r.Path(f.Path, why, "remove the entry")
	}
	for _, d := range own.Storage.Directories {
		r.Path(d.Path, why, "remove the entry")
	}
	for _, l := range own.Storage.Links {
		r.Path(l.Path, why, "remove the entry")
	}
	for _, u := range own.Systemd.Units {
		if u.Contents != nil || u.Enabled != nil || u.Mask != nil {
			r.Unit(u.Name, why)
		}
		for _, d := range u.Dropins {
			r.DropIn(u.Name, d.Name, why)
		}
	}
	r.Unit(SettingsUnit, why)
	return r
}

// checkReserved returns a problem for each entry of cfg that r reserves.
// (Ignition's validation has refused relative and unclean paths, and
// entries under a link the config creates.)
func checkReserved(cfg types.Config, r *Reserved) []Problem {
	var probs []Problem
	node := func(at fieldPath, p string) {
		at = at.with("path")
		if x, ok := r.path(p); ok {
			probs = append(probs, Problem{at: at, Message: fmt.Sprintf("%q: %s", p, x.why), Hint: orDefault(x.hint, "remove the entry")})
			return
		}
		if dir, name := path.Split(p); dir == UnitDir+"/" {
			if u, ok := r.unit(name); ok {
				probs = append(probs, Problem{at: at, Message: fmt.Sprintf("%q is the unit file of %s: %s", p, name, u.why),
					Hint: "remove the entry; to change the unit, give it a drop-in (systemd.units[].dropins)"})
			}
		}
	}
	for i, f := range cfg.Storage.Files {
		node(fieldPath{"storage", "files", i}, f.Path)
	}
	for i, d := range cfg.Storage.Directories {
		node(fieldPath{"storage", "directories", i}, d.Path)
	}
	for i, l := range cfg.Storage.Links {
		node(fieldPath{"storage", "links", i}, l.Path)
	}
	for i, u := range cfg.Systemd.Units {
		at := fieldPath{"systemd", "units", i}
		if x, ok := r.unit(u.Name); ok && (u.Contents != nil || u.Enabled != nil || (u.Mask != nil && *u.Mask)) {
			var what []string
			if u.Contents != nil {
				what = append(what, "contents")
			}
			if u.Enabled != nil {
				what = append(what, "enabled")
			}
			if u.Mask != nil && *u.Mask {
				what = append(what, "mask")
			}
			probs = append(probs, Problem{at: at, Message: fmt.Sprintf("unit %s: %s: a snippet may not set its %s", u.Name, x.why, strings.Join(what, ", ")),
				Hint: "remove them; to change the unit, give it only drop-ins"})
		}
		for j, d := range u.Dropins {
			p := UnitDir + "/" + u.Name + ".d/" + d.Name
			if x, ok := r.path(p); ok {
				probs = append(probs, Problem{at: at.with("dropins", j, "name"), Message: fmt.Sprintf("drop-in %s of unit %s: %s", d.Name, u.Name, x.why),
					Hint: orDefault(x.hint, "give your drop-in another name")})
			}
		}
	}
	return probs
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
