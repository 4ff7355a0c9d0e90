package test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path of this module.
const module = "github.com/roostfleet/roost"

// A wall says that the packages of roots (go list patterns; what they
// build, not their tests) must not link a package forbidden matches.
type wall struct {
	name      string
	roots     []string
	forbidden []string // import paths; a trailing "..." matches any path with that prefix
	// only, when set, replaces forbidden: every non-standard package but
	// the roots themselves and these is forbidden (a leaf package).
	only []string
	why  string // the reason, for the failure message
}

// walls are the dependency walls between the binaries: the agent never
// links the hub, Raft or the CLI; the hub and roostctl never link netlink
// or the DHCP client (hostnet's planner is netlink-free, its kernel adapter
// hostnet/nlkernel is the agent's); roostctl never links the hub or Raft;
// the packages the three share across those walls are leaves.
var walls = []wall{
	{
		name:      "roost-agent",
		roots:     []string{module + "/agent/...", module + "/cmd/roost-agent"},
		forbidden: []string{module + "/hub", module + "/hub/...", "github.com/hashicorp/raft...", module + "/cli", module + "/cli/..."},
		why:       "the agent reaches the hub only through proto/ (and internal/tlsconfig) and prints nothing the CLI's way",
	},
	{
		// cmd/roost-agent builds its own command line with cobra.
		name:      "agent packages",
		roots:     []string{module + "/agent/..."},
		forbidden: []string{"github.com/spf13/cobra..."},
		why:       "the agent's packages are a library for cmd/roost-agent; command lines are cmd/'s",
	},
	{
		name:      "roost-hub",
		roots:     []string{module + "/hub/...", module + "/cmd/roost-hub"},
		forbidden: []string{"github.com/vishvananda/netlink...", "github.com/vishvananda/netns...", "github.com/insomniacslk/dhcp...", module + "/netprofiles/hostnet...", module + "/netprofiles/dhcp4"},
		why:       "the hub validates NetworkProfiles (package netprofiles) but never applies one",
	},
	{
		name:      "roostctl: hub, Raft, DHCP",
		roots:     []string{module + "/cli/...", module + "/cmd/roostctl", module + "/client"},
		forbidden: []string{module + "/hub", module + "/hub/...", "github.com/hashicorp/raft...", "github.com/insomniacslk/dhcp...", module + "/netprofiles/dhcp4"},
		why:       "roostctl reaches the hub only through proto/, client/ and internal/tlsconfig",
	},
	{
		name:      "roostctl: netlink",
		roots:     []string{module + "/cli/...", module + "/cmd/roostctl", module + "/client"},
		forbidden: []string{"github.com/vishvananda/netlink...", "github.com/vishvananda/netns...", module + "/netprofiles/hostnet/nlkernel"},
		why: "roostctl validates NetworkProfiles with package netprofiles and `roostctl netprofile plan` runs " +
			"hostnet's planner on its simulated kernel; only the agent talks to a kernel (hostnet/nlkernel)",
	},
	{
		name:      "netprofiles/hostnet (planner and simulated kernel)",
		roots:     []string{module + "/netprofiles/hostnet"},
		forbidden: []string{"github.com/vishvananda/netlink...", "github.com/vishvananda/netns...", "github.com/insomniacslk/dhcp...", module + "/netprofiles/hostnet/nlkernel", module + "/netprofiles/dhcp4"},
		why:       "roostctl links the planner: it speaks hostnet's own link, address and route types, and hostnet/nlkernel converts them to netlink's for the agent",
	},
	{
		name:      "netprofiles (model and validation)",
		roots:     []string{module + "/netprofiles"},
		forbidden: []string{"github.com/vishvananda/netlink...", "github.com/vishvananda/netns...", "github.com/insomniacslk/dhcp...", module + "/netprofiles/hostnet", module + "/netprofiles/dhcp4"},
		why:       "the hub and roostctl link it: applying a profile is netprofiles/hostnet's and DHCP netprofiles/dhcp4's",
	},
	{
		name:  "agent/config (the agent's configuration schema)",
		roots: []string{module + "/agent/config"},
		only:  []string{"sigs.k8s.io/yaml...", "go.yaml.in/yaml...", module + "/internal/atomicfile", "github.com/google/renameio..."},
		why:   "imagebuilder, the hub and roostctl write agent configurations without linking the agent",
	},
	{
		name:  "internal/atomicfile",
		roots: []string{module + "/internal/atomicfile"},
		only:  []string{"github.com/google/renameio..."},
		why:   "the agent, the hub, roostctl and imagebuilder all write files atomically with it",
	},
	{
		name:  "internal/english",
		roots: []string{module + "/internal/english"},
		only:  []string{},
		why:   "the hub, the agent and roostctl all word messages with it",
	},
	{
		name: "hub controllers",
		roots: []string{module + "/hub/controller", module + "/hub/leader", module + "/hub/rollout", module + "/hub/revisions",
			module + "/hub/scheduler", module + "/hub/liveness", module + "/hub/clusters", module + "/hub/state"},
		forbidden: []string{module + "/hub/api"},
		why:       "the API and the leader controllers meet only in the process wiring (package hub), which hands each what it needs",
	},
	{
		name:  "internal/cpio",
		roots: []string{module + "/internal/cpio"},
		only:  []string{},
		why:   "the agent and imagebuilder both write config initrds; neither links the other for it",
	},
	{
		name:  "internal/tlsconfig",
		roots: []string{module + "/internal/tlsconfig"},
		only:  []string{},
		why:   "client/, roostctl and the agent speak TLS to the hub without linking hub/ca",
	},
}

// TestDependencyWalls checks every wall with `go list -deps`, and names the
// import chain that breaks one, e.g.
//
//	roostctl: github.com/roostfleet/roost/cmd/roostctl → …/cli → …/hub/ca
func TestDependencyWalls(t *testing.T) {
	for _, w := range walls {
		t.Run(w.name, func(t *testing.T) {
			g := loadGraph(t, w.roots)
			broken := 0
			for _, chain := range g.reach(w) {
				broken++
				t.Errorf("%s links %s: %s\n  import chain: %s", w.name, chain[len(chain)-1], w.why, strings.Join(chain, " → "))
			}
			if broken == 0 && len(g.roots) == 0 {
				t.Fatalf("%v matched no packages", w.roots)
			}
		})
	}
}

// TestWallsCatchALeak makes sure the walls bite: a graph in which roostctl
// reaches the hub through client/ breaks the roostctl wall, naming the
// chain, and so does netlink reached through hostnet's kernel adapter.
func TestWallsCatchALeak(t *testing.T) {
	g := &graph{
		roots: []string{module + "/cmd/roostctl"},
		imports: map[string][]string{
			module + "/cmd/roostctl":                 {module + "/cli"},
			module + "/cli":                          {module + "/client", module + "/netprofiles/hostnet", "fmt"},
			module + "/client":                       {module + "/hub/ca"},
			module + "/netprofiles/hostnet":          {"fmt"},
			module + "/netprofiles/hostnet/nlkernel": {module + "/netprofiles/hostnet", "github.com/vishvananda/netlink"},
			module + "/hub/ca":                       {"crypto/x509"},
			"github.com/vishvananda/netlink":         nil,
		},
		std: map[string]bool{"fmt": true, "crypto/x509": true},
	}
	var hub, netlink wall
	for _, w := range walls {
		switch w.name {
		case "roostctl: hub, Raft, DHCP":
			hub = w
		case "roostctl: netlink":
			netlink = w
		}
	}
	want := []string{module + "/cmd/roostctl", module + "/cli", module + "/client", module + "/hub/ca"}
	if got := g.reach(hub); len(got) != 1 || !slices.Equal(got[0], want) {
		t.Errorf("hub wall: got chains %q, want one: %q", got, want)
	}
	if got := g.reach(netlink); len(got) != 0 {
		t.Errorf("the planner alone: got chains %q, want none", got)
	}
	g.imports[module+"/netprofiles/hostnet"] = append(g.imports[module+"/netprofiles/hostnet"], "github.com/vishvananda/netlink")
	want = []string{module + "/cmd/roostctl", module + "/cli", module + "/netprofiles/hostnet", "github.com/vishvananda/netlink"}
	if got := g.reach(netlink); len(got) != 1 || !slices.Equal(got[0], want) {
		t.Errorf("netlink through the planner: got chains %q, want one: %q", got, want)
	}
	g.imports[module+"/netprofiles/hostnet"] = []string{"fmt"}
	g.imports[module+"/cli"] = append(g.imports[module+"/cli"], module+"/netprofiles/hostnet/nlkernel")
	if got := g.reach(netlink); len(got) != 1 || got[0][len(got[0])-1] != module+"/netprofiles/hostnet/nlkernel" {
		t.Errorf("the kernel adapter imported by cli: got chains %q, want one ending in it", got)
	}
	leaf := wall{name: "leaf", roots: []string{module + "/client"}, only: []string{}}
	g.roots = []string{module + "/client"}
	if got := g.reach(leaf); len(got) != 1 || got[0][1] != module+"/hub/ca" {
		t.Errorf("leaf wall: got chains %q, want client → hub/ca", got)
	}
}

// graph is the import graph of some packages and everything they link.
type graph struct {
	roots   []string            // the packages the patterns matched, sorted
	imports map[string][]string // import path → its imports
	std     map[string]bool     // standard library packages
}

// loadGraph lists the packages matching patterns and their dependencies.
func loadGraph(t *testing.T, patterns []string) *graph {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}|{{.Standard}}|{{.DepOnly}}|{{join .Imports \" \"}}"}, patterns...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	g := &graph{imports: map[string][]string{}, std: map[string]bool{}}
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "|", 4)
		if len(f) != 4 {
			t.Fatalf("go list printed %q", line)
		}
		g.imports[f[0]] = strings.Fields(f[3])
		g.std[f[0]] = f[1] == "true"
		if f[2] == "false" {
			g.roots = append(g.roots, f[0])
		}
	}
	slices.Sort(g.roots)
	return g
}

// reach returns, for every package w forbids that the roots link, one
// shortest import chain from a root to it (root first).
func (g *graph) reach(w wall) [][]string {
	roots := map[string]bool{}
	for _, r := range g.roots {
		roots[r] = true
	}
	bad := func(p string) bool {
		if w.only != nil {
			// "C" is cgo's pseudo-package (net, os/user).
			return !g.std[p] && p != "C" && !roots[p] && !matchAny(w.only, p)
		}
		return matchAny(w.forbidden, p)
	}
	from := map[string]string{}
	seen := map[string]bool{}
	queue := slices.Clone(g.roots)
	for _, r := range queue {
		seen[r] = true
	}
	var chains [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if bad(p) {
			var chain []string
			for q := p; q != ""; q = from[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			chains = append(chains, chain)
			continue
		}
		for _, d := range g.imports[p] {
			if !seen[d] {
				seen[d] = true
				from[d] = p
				queue = append(queue, d)
			}
		}
	}
	return chains
}

// matchAny reports whether p is one of patterns, where a pattern ending in
// "..." matches every path it prefixes.
func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if prefix, ok := strings.CutSuffix(pat, "..."); ok {
			if strings.HasPrefix(p, prefix) {
				return true
			}
		} else if p == pat {
			return true
		}
	}
	return false
}

// TestOnlyTheHubWiringImportsAPI enforces that hub/api stays the outer
// layer of the hub: no package under hub/ imports it but the process
// wiring (the hub package itself), so what the API layer forwards to (the
// state, the agent streams, the controllers) never depends on it.
func TestOnlyTheHubWiringImportsAPI(t *testing.T) {
	const api = "github.com/roostfleet/roost/hub/api"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/roostfleet/roost/hub/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 {
		t.Fatalf("go list printed %d packages under hub/", len(lines))
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if f[0] == "github.com/roostfleet/roost/hub" || f[0] == api {
			continue
		}
		for _, imp := range f[1:] {
			if imp == api {
				t.Errorf("%s imports %s; only the hub package wires the API", f[0], api)
			}
		}
	}
}
