package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roostfleet/roost/cli"
	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/syncbuf"
)

// Issue 24, acceptance 3 ("truthful outcomes"). The sizes keep the test
// under a minute on two cores.
const (
	outcomeWrites   = 240                    // roostctl invocations that write
	outcomeWriters  = 3                      // run concurrently
	outcomeKillGap  = 400 * time.Millisecond // between a member's restart and the next kill
	outcomeMinKills = 5
)

// killable is one member of the cluster TestExitStatusesMatchState kills
// and restarts on the same data dir and addresses.
type killable struct {
	id, dir, api, raft string
	h                  *hub.Hub // nil while killed
}

func (k *killable) start(t *testing.T, join, token string) error {
	o := fastRaft(hub.Options{NodeID: k.id, DataDir: k.dir, APIAddr: k.api, RaftAddr: k.raft, Join: join, JoinToken: token})
	if o.APIAddr == "" {
		o.APIAddr, o.RaftAddr = "127.0.0.1:0", "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := hub.Start(ctx, o)
	if err != nil {
		return err
	}
	if err := h.WaitLeader(ctx); err != nil {
		h.Close()
		return err
	}
	k.h, k.api, k.raft = h, h.APIAddr(), h.Node().Addr()
	return nil
}

// outcomeRun is one roostctl invocation of the test and what it said.
type outcomeRun struct {
	n    int
	verb string // "token", "apply", "join", "delete"
	name string // cluster name (apply, delete)
	code int
	out  string
	err  string
}

// TestExitStatusesMatchState runs 240 roostctl writes (cli.Run, as the
// binary runs them: a new connection per command over all three members'
// API addresses) from three concurrent writers against an in-process hub
// of three members whose leader is killed (no handover, connections cut)
// and restarted again and again. Afterwards every exit status must match
// the final state: 0 = applied, 4 (ExitUnknown) = either, any other =
// not applied. The writes are enrollment tokens (token create, one label
// per invocation, which also shows no retry made a second token), join
// tokens (hub join), Cluster applies and deletes of Clusters created before.
func TestExitStatusesMatchState(t *testing.T) {
	if testing.Short() {
		t.Skip("3 hub members killed and restarted around 240 roostctl writes (~40 s); skipped under -short")
	}
	members := []*killable{{id: "hub-a", dir: t.TempDir()}, {id: "hub-b", dir: t.TempDir()}, {id: "hub-c", dir: t.TempDir()}}
	var mu sync.Mutex // guards members[*].h
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range members {
			if m.h != nil {
				m.h.Close()
			}
		}
	})
	if err := members[0].start(t, "", ""); err != nil {
		t.Fatal(err)
	}
	config := members[0].h.AdminConfigPath()
	waitFor(t, "admin.conf", func() bool { _, err := os.Stat(config); return err == nil })
	admin := dial(t, config, members[0].api)
	jt, err := admin.CreateJoinToken(context.Background(), &roostv1.CreateJoinTokenRequest{MaxUses: 6, TtlSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members[1:] {
		// A join may meet an election of the short Raft timeouts (the
		// -race detector slows everything): start again on a fresh dir.
		for try := 1; ; try++ {
			err := m.start(t, members[0].api, jt.GetToken())
			if err == nil {
				break
			}
			if try == 3 {
				t.Fatal(err)
			}
			t.Logf("join of %s, try %d: %v", m.id, try, err)
			m.dir, m.api, m.raft = t.TempDir(), "", ""
		}
	}
	waitFor(t, "3 voters", func() bool {
		s, err := members[0].h.Node().Servers()
		return err == nil && len(s) == 3
	})
	joinTokensBefore := len(members[0].h.FSM().JoinTokens())
	hubs := members[0].api + "," + members[1].api + "," + members[2].api
	dir := t.TempDir()

	// The killer: kill the leader, wait for a new one, restart the killed
	// member on its data dir, let it catch up, pause, again.
	stop := make(chan struct{})
	var kills atomic.Int32
	killerDone := make(chan struct{})
	leaderOfMembers := func() *killable {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range members {
			if m.h != nil && m.h.Node().IsLeader() {
				return m
			}
		}
		return nil
	}
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(outcomeKillGap):
			}
			var victim *killable
			for deadline := time.Now().Add(10 * time.Second); victim == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				victim = leaderOfMembers()
			}
			if victim == nil {
				t.Errorf("no leader to kill after %d kills", kills.Load())
				return
			}
			mu.Lock()
			h := victim.h
			victim.h = nil
			mu.Unlock()
			h.Kill()
			kills.Add(1)
			var next *killable
			for deadline := time.Now().Add(10 * time.Second); next == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				next = leaderOfMembers()
			}
			if next == nil {
				t.Errorf("no new leader within 10 s of kill %d", kills.Load())
				return
			}
			time.Sleep(200 * time.Millisecond) // writes meet the new leader with one member down
			if err := victim.start(t, "", ""); err != nil {
				t.Errorf("restart %s after kill %d: %v", victim.id, kills.Load(), err)
				return
			}
			mu.Lock()
			restarted := victim.h
			mu.Unlock()
			target := next.h.Node().CommitIndex()
			for deadline := time.Now().Add(10 * time.Second); restarted.Node().AppliedIndex() < target && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()

	// The writers.
	var (
		next     atomic.Int32
		runsMu   sync.Mutex
		runs     []*outcomeRun
		created  []string // Clusters applied with exit 0, not yet picked for a delete
		deleting = map[string]bool{}
	)
	run := func(n int, args ...string) *outcomeRun {
		var out, errb syncbuf.Buffer
		timeout := "5s"
		if n%5 == 4 {
			timeout = "500ms" // short enough that some writes outlast it
		}
		args = append([]string{"--config", config, "--hub", hubs, "--timeout", timeout, "--verbose"}, args...)
		code := cli.Run(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		return &outcomeRun{n: n, code: code, out: out.String(), err: errb.String()}
	}
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < outcomeWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1))
				if n > outcomeWrites {
					return
				}
				var r *outcomeRun
				switch n % 4 {
				case 0:
					r = run(n, "token", "create", "--ttl", "1h", "--label", fmt.Sprintf("run=%d", n), "-o", "json")
					r.verb = "token"
				case 1:
					name := fmt.Sprintf("c-%d", n)
					file := filepath.Join(dir, name+".yaml")
					if err := os.WriteFile(file, []byte("apiVersion: roost.io/v1\nkind: Cluster\nmetadata: {name: "+name+"}\n"+
						"spec: {apiEndpoint: \"https://10.0.0.1:6443\", kubernetesVersion: v1.34.4}\n"), 0o644); err != nil {
						t.Error(err)
						return
					}
					r = run(n, "apply", "-f", file)
					r.verb, r.name = "apply", name
				case 2:
					r = run(n, "hub", "join", "--ttl", "1h", "-o", "json")
					r.verb = "join"
				case 3:
					runsMu.Lock()
					var name string
					if len(created) > 0 {
						name, created = created[0], created[1:]
						deleting[name] = true
					}
					runsMu.Unlock()
					if name == "" {
						continue
					}
					r = run(n, "delete", "cluster", name)
					r.verb, r.name = "delete", name
				}
				runsMu.Lock()
				runs = append(runs, r)
				if r.verb == "apply" && r.code == cli.ExitOK {
					created = append(created, r.name)
				}
				runsMu.Unlock()
			}
		}()
	}
	// Keep killing until the writers are done, with at least outcomeMinKills kills.
	wg.Wait()
	for kills.Load() < outcomeMinKills && !t.Failed() {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-killerDone
	writeTime := time.Since(start)
	if t.Failed() {
		t.FailNow()
	}

	// The final state, from a leader that has applied every committed
	// write (a barrier; leadership may still move once after the last
	// restart, so until one succeeds).
	var leader *killable
	waitFor(t, "a leader that applied every write", func() bool {
		if leader = leaderOfMembers(); leader == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return leader.h.Node().Barrier(ctx) == nil
	})
	fsm := leader.h.FSM()
	clusters := map[string]bool{}
	objs, _, err := fsm.List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		clusters[o.GetCluster().GetMetadata().GetName()] = true
	}
	tokensByRun := map[string][]string{}
	tokens, _, err := fsm.List("EnrollmentToken", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range tokens {
		tok := o.GetEnrollmentToken()
		run := tok.GetSpec().GetServerLabels()["run"]
		tokensByRun[run] = append(tokensByRun[run], tok.GetMetadata().GetName())
	}
	joinTokens := map[string]bool{}
	for _, jt := range fsm.JoinTokens() {
		joinTokens[jt.GetId()] = true
	}

	counts := map[string]map[int]int{}
	joinOK, joinUnknown := 0, 0
	retried, settled := 0, 0 // commands that sent a write more than once; of those, after an attempt of unknown outcome
	for _, r := range runs {
		if attempts := writeAttempts(r.err); len(attempts) > 1 {
			retried++
			for _, c := range attempts[:len(attempts)-1] {
				if strings.Contains(c, "outcome unknown") {
					settled++
					break
				}
			}
		}
		if counts[r.verb] == nil {
			counts[r.verb] = map[int]int{}
		}
		counts[r.verb][r.code]++
		fail := func(format string, a ...any) {
			t.Errorf("run %d (%s %s) exit %d: %s\n  stdout: %s\n  stderr: %s", r.n, r.verb, r.name, r.code, fmt.Sprintf(format, a...), strings.TrimSpace(r.out), strings.TrimSpace(r.err))
		}
		if r.code == cli.ExitUnknown && !strings.Contains(r.err, "outcome unknown") {
			fail("exit code 4 without saying the outcome is unknown")
		}
		switch r.verb {
		case "token":
			got := tokensByRun[fmt.Sprint(r.n)]
			if len(got) > 1 {
				fail("%d tokens made by one command: %v", len(got), got)
			}
			switch r.code {
			case cli.ExitOK:
				var out struct{ Name, Token string }
				if err := json.Unmarshal([]byte(r.out), &out); err != nil || len(got) != 1 || got[0] != out.Name || !strings.HasPrefix(out.Token, out.Name+".") {
					fail("printed %+v (%v); the state has %v", out, err, got)
				}
			case cli.ExitUnknown:
			default:
				if len(got) != 0 {
					fail("failed, yet the state has token %v", got)
				}
			}
		case "apply":
			switch r.code {
			case cli.ExitOK:
				if !clusters[r.name] && !deleting[r.name] {
					fail("applied, yet not in the state")
				}
			case cli.ExitUnknown:
			default:
				if clusters[r.name] {
					fail("failed, yet in the state")
				}
			}
		case "delete":
			switch r.code {
			case cli.ExitOK:
				if clusters[r.name] {
					fail("deleted, yet still in the state")
				}
			case cli.ExitUnknown:
			default:
				if !clusters[r.name] {
					fail("failed, yet gone from the state")
				}
			}
		case "join":
			switch r.code {
			case cli.ExitOK:
				joinOK++
				var out struct{ ID string }
				if err := json.Unmarshal([]byte(r.out), &out); err != nil || !joinTokens[out.ID] {
					fail("printed join token %q (%v), which the state does not have", out.ID, err)
				}
			case cli.ExitUnknown:
				joinUnknown++
			}
		}
	}
	// Join tokens carry no mark of the command that made them: count them.
	// Every exit 0 made one, exit 4 at most one, anything else none.
	if made := len(joinTokens) - joinTokensBefore; made < joinOK || made > joinOK+joinUnknown {
		t.Errorf("%d join tokens were made by %d commands that succeeded and %d of unknown outcome", made, joinOK, joinUnknown)
	}
	total := map[int]int{}
	for verb, byCode := range counts {
		t.Logf("%-6s exit 0: %3d  exit 4 (unknown): %3d  other: %v", verb, byCode[0], byCode[4], others(byCode))
		for c, n := range byCode {
			total[c] += n
		}
	}
	t.Logf("%d writes in %s with %d leader kills: %d applied (exit 0), %d of unknown outcome (exit 4), %d failed (%v); "+
		"%d sent more than once, %d of them after an attempt that may have been applied (same request ID)",
		len(runs), writeTime.Round(time.Millisecond), kills.Load(), total[0], total[4], len(runs)-total[0]-total[4], others(total), retried, settled)
	if len(runs) < 200 {
		t.Errorf("only %d writes ran, want ≥ 200", len(runs))
	}
}

// writeAttempts returns what roostctl --verbose logged of each attempt of
// its write calls ("roostctl: /roost.v1.HubService/Apply: Unavailable
// (outcome unknown), request 5f…-1 in 3ms" → "Unavailable (outcome
// unknown), request 5f…-1"), reads (List, Get, …) left out.
func writeAttempts(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(line, "roostctl: /roost.v1.HubService/")
		if !ok {
			continue
		}
		method, rest, ok := strings.Cut(rest, ": ")
		if !ok || strings.HasPrefix(method, "List") || method == "Get" {
			continue
		}
		code, _, _ := strings.Cut(rest, " in ")
		out = append(out, code)
	}
	return out
}

// others returns the counts of exit codes other than 0 and 4.
func others(byCode map[int]int) map[int]int {
	out := map[int]int{}
	for c, n := range byCode {
		if c != 0 && c != 4 {
			out[c] = n
		}
	}
	return out
}
