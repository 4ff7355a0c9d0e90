package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// completionHub is a fake hub with a few objects of every kind the
// completions offer.
func completionHub() *fakeHub {
	f := newFakeHub()
	meta := func(name string) *roostv1.ObjectMeta { return &roostv1.ObjectMeta{Name: name} }
	for _, p := range []string{"workers", "gpu"} {
		f.put(resource.Wrap(&roostv1.Pool{Metadata: meta(p), Spec: &roostv1.PoolSpec{Cluster: "prod"}}))
	}
	for _, s := range []string{"srv-a", "srv-b"} {
		f.put(resource.Wrap(&roostv1.Server{Metadata: meta(s)}))
	}
	f.put(resource.Wrap(&roostv1.Machine{Metadata: meta("workers-1"), Spec: &roostv1.MachineSpec{Pool: "workers", Server: "srv-a"}}))
	f.put(resource.Wrap(&roostv1.Machine{Metadata: meta("edge-1"), Spec: &roostv1.MachineSpec{Server: "srv-b"}}))
	f.put(resource.Wrap(&roostv1.EnrollmentToken{Metadata: meta("abcdef")}))
	f.put(resource.Wrap(&roostv1.EnrollmentToken{Metadata: meta("revkd1"), Status: &roostv1.EnrollmentTokenStatus{Revoked: true}})) // not offered to revoke
	f.put(resource.Wrap(&roostv1.MaintenanceWindow{Metadata: meta("nightly")}))
	f.put(resource.Wrap(&roostv1.Cluster{Metadata: meta("prod")}))
	f.put(resource.Wrap(&roostv1.MachineClass{Metadata: meta("big")}))
	f.put(resource.Wrap(&roostv1.NetworkProfile{Metadata: meta("bond")}))
	f.put(resource.Wrap(&roostv1.ImageRelease{Metadata: meta("v2026-11-0"), Spec: &roostv1.ImageReleaseSpec{Version: "2026.11.0", Channels: []string{"stable"}}}))
	f.members = []*roostv1.Member{{Id: "hub-1", ApiAddress: "10.0.0.1:7443", Leader: true}, {Id: "hub-2", ApiAddress: "10.0.0.2:7443"}}
	return f
}

// complete runs `roostctl __complete ARGS...` (what the shell scripts run
// on Tab; the last argument is the word being completed) and returns the
// candidates without their descriptions and the directive line.
func complete(t *testing.T, args ...string) (names []string, directive string, r result) {
	t.Helper()
	r = runCLI(t, "", append([]string{"__complete"}, args...)...)
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	directive = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		names = append(names, name)
	}
	return names, directive, r
}

// noFileComp is the directive line of cobra.ShellCompDirectiveNoFileComp:
// the shell must not offer file names instead.
const noFileComp = ":4"

func TestCompleteObjectNames(t *testing.T) {
	f := completionHub()
	config, _ := startFakeHub(t, f)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "pool", ""}, []string{"gpu", "workers"}},
		{[]string{"get", "pools", "w"}, []string{"workers"}},
		{[]string{"get", "pl", "workers", ""}, []string{"gpu"}}, // names given are not offered again
		{[]string{"get", "nosuchkind", ""}, nil},
		{[]string{"describe", "server", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"describe", "srv", "srv-a", ""}, nil}, // describe takes one NAME
		{[]string{"delete", "machine", ""}, []string{"edge-1", "workers-1"}},
		{[]string{"delete", "mw", ""}, []string{"nightly"}},
		{[]string{"pool", "assign", ""}, []string{"gpu", "workers"}},
		{[]string{"pool", "assign", "workers", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"pool", "assign", "workers", "srv-a", ""}, []string{"srv-b"}},
		{[]string{"pool", "unassign", "workers", ""}, []string{"srv-a"}}, // the servers of the pool's Machines
		{[]string{"pool", "pin", "workers", ""}, []string{"2026.11.0"}},
		{[]string{"pool", "unpin", ""}, []string{"gpu", "workers"}},
		{[]string{"token", "revoke", ""}, []string{"abcdef"}},
		{[]string{"token", "create", "--pool", ""}, []string{"gpu", "workers"}},
		{[]string{"rollout", "status", ""}, []string{"gpu", "workers"}},
		{[]string{"rollout", "status", "gpu", ""}, nil},
		{[]string{"rollout", "pause", "g"}, []string{"gpu"}},
		{[]string{"window", "next", ""}, []string{"nightly"}},
		{[]string{"window", "next", "--pool", ""}, []string{"gpu", "workers"}},
		{[]string{"window", "next", "--pool", "workers", ""}, nil}, // --pool takes no WINDOW
		{[]string{"hub", "remove", ""}, []string{"hub-1", "hub-2"}},
		{[]string{"server", "cordon", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"server", "decommission", "srv-b", ""}, []string{"srv-a"}},
		{[]string{"server", "label", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"server", "label", "srv-a", ""}, nil}, // then KEY=VALUE
		{[]string{"server", "logs", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"server", "logs", "srv-a", ""}, nil}, // one server
		{[]string{"server", "logs", "srv-a", "-o", ""}, []string{"text", "json"}},
		{[]string{"server", "logs", "srv-a", "--boot", ""}, []string{"0", "-1", "-2"}},
		{[]string{"server", "bundle", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"machine", "delete", ""}, []string{"edge-1", "workers-1"}},
		{[]string{"machine", "create", "--server", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"machine", "create", "--server", "srv-a", "--class", ""}, []string{"big"}},
		// cobra offers the required flags too.
		{[]string{"cluster", "set-credentials", ""}, []string{"--kubeconfig", "prod"}},
		{[]string{"netprofile", "plan", ""}, []string{"--server", "bond"}},
		{[]string{"netprofile", "plan", "bond", "--server", ""}, []string{"srv-a", "srv-b"}},
		{[]string{"image", "describe", ""}, []string{"2026.11.0"}},
		{[]string{"image", "promote", ""}, []string{"2026.11.0"}},
		{[]string{"image", "delete", ""}, []string{"2026.11.0"}},
	} {
		args := append([]string{"--config", config}, tc.args...)
		got, directive, r := complete(t, args...)
		if r.code != ExitOK || directive != noFileComp || !slices.Equal(got, tc.want) {
			t.Errorf("roostctl %s<TAB>: exit %d, got %q %s, want %q %s\nstderr: %s",
				strings.Join(tc.args, " "), r.code, got, directive, tc.want, noFileComp, r.err)
		}
	}
	// Completions read the member's own state: fast, and without a leader.
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.lists {
		if l.GetConsistency() != roostv1.Consistency_CONSISTENCY_STALE {
			t.Errorf("completion listed %s with consistency %s, want stale", l.GetKind(), l.GetConsistency())
		}
	}
}

func TestCompleteKinds(t *testing.T) {
	// Kinds need no hub (and no configuration).
	got, directive, _ := complete(t, "--config", "/nonexistent/config", "get", "")
	if directive != noFileComp || !slices.Contains(got, "pools") || !slices.Contains(got, "servers") || !slices.Contains(got, "maintenancewindows") {
		t.Errorf("get <TAB>: got %q %s", got, directive)
	}
	for word, want := range map[string][]string{"srv": {"srv"}, "pool": {"pools"}, "mw": {"mw"}, "xyz": nil} {
		got, _, _ := complete(t, "describe", word)
		if !slices.Equal(got, want) {
			t.Errorf("describe %s<TAB>: got %q, want %q", word, got, want)
		}
	}
}

// Without a usable hub, completion offers nothing (and no file names),
// prints nothing but the directive, and gives up after completionTimeout.
func TestCompleteSilentWithoutHub(t *testing.T) {
	pki := newTestPKI(t)
	slow := completionHub()
	slow.listDelay = 10 * time.Second
	slowConfig, _ := startFakeHub(t, slow)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no configuration", []string{"--config", "/nonexistent/config"}},
		{"hub unreachable", []string{"--config", pki.writeConfig(t, closedAddr(t))}},
		{"bad --hub", []string{"--config", slowConfig, "--hub", "not-an-address"}},
		{"hub too slow", []string{"--config", slowConfig}},
	} {
		cmds := [][]string{{"get", "pool", ""}, {"hub", "remove", ""}, {"-v", "token", "revoke", ""}}
		if tc.name == "hub unreachable" || tc.name == "hub too slow" {
			cmds = cmds[:1] // each takes a while (retries, completionTimeout)
		}
		for _, cmd := range cmds {
			start := time.Now()
			got, directive, r := complete(t, append(tc.args, cmd...)...)
			took := time.Since(start)
			if r.code != ExitOK || len(got) != 0 || directive != noFileComp || r.out != noFileComp+"\n" {
				t.Errorf("%s, %s<TAB>: exit %d, stdout %q", tc.name, strings.Join(cmd, " "), r.code, r.out)
			}
			if strings.Contains(r.err, "error") || strings.Contains(r.err, "roostctl:") {
				t.Errorf("%s, %s<TAB>: stderr %q", tc.name, strings.Join(cmd, " "), r.err)
			}
			if took > completionTimeout+2*time.Second {
				t.Errorf("%s, %s<TAB>: took %s", tc.name, strings.Join(cmd, " "), took)
			}
		}
	}
}
