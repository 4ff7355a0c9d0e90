package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/syncbuf"
)

// TestGetEventsRealHub runs 'get events' against a real hub: a watch of
// one pool's Events started first sees the rollout pause and resume the
// operator makes, in order, and nothing about other objects; the list
// prints kubectl's columns, --for filters, JSON carries the Event objects,
// describe ends with the pool's Events, and bad --for values are usage
// errors.
func TestGetEventsRealHub(t *testing.T) {
	_, config, run := realHubCLI(t)
	if r := run("apply", "-f", filepath.Join("..", "examples", "all.yaml")); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.err)
	}
	pool := strings.Fields(strings.Split(run("get", "pools").out, "\n")[1])[0]

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncbuf.Buffer
	done := make(chan result, 1)
	go func() {
		done <- runCLIStreams(ctx, "", &out, &errb, "--config", config, "get", "events", "--for", "pool/"+pool, "--watch", "-o", "json")
	}()
	time.Sleep(500 * time.Millisecond) // the watch is listening

	for _, verb := range []string{"pause", "resume"} {
		if r := run("rollout", verb, pool); r.code != 0 {
			t.Fatalf("rollout %s: exit %d\n%s", verb, r.code, r.err)
		}
	}
	var reasons []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		reasons = watchedReasons(t, out.String())
		if strings.Contains(strings.Join(reasons, ","), "RolloutResumed") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if r := <-done; r.code != 0 {
		t.Errorf("watch: exit %d, err %q", r.code, errb.String())
	}
	// The pool's ReplicaFailure (no Server matches) may come before.
	if got := strings.Join(reasons, ","); !strings.Contains(got, "RolloutPaused,RolloutResumed") {
		t.Errorf("the watch saw %q, want RolloutPaused then RolloutResumed", got)
	}

	r := run("get", "events", "--for", "pool/"+pool)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	paused, resumed := strings.Index(r.out, "RolloutPaused "), strings.Index(r.out, "RolloutResumed ")
	if r.code != 0 || len(lines) < 3 || strings.Join(strings.Fields(lines[0]), " ") != "LAST SEEN TYPE REASON OBJECT COUNT MESSAGE" ||
		paused < 0 || resumed < paused || strings.Count(r.out, "pool/"+pool) != len(lines)-1 {
		t.Errorf("get events --for: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run("get", "events", "--for", "server/nothing-here"); r.code != 0 || r.out != "" || !strings.Contains(r.err, "No events found") {
		t.Errorf("get events --for an object without any: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	if r := run("describe", "pool", pool); r.code != 0 || !strings.Contains(r.out, "\nEvents:\n") || !strings.Contains(r.out, "RolloutResumed") {
		t.Errorf("describe pool: exit %d\n%s%s", r.code, r.out, r.err)
	}
	for _, bad := range [][]string{
		{"get", "pools", "--for", "pool/" + pool},
		{"get", "events", "--for", pool},
		{"get", "events", "--for", "nokind/x"},
	} {
		if r := run(bad...); r.code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", bad, r.code, ExitUsage, r.err)
		}
	}
}

// watchedReasons returns the reasons of the Events in the JSON objects a
// 'get --watch -o json' printed.
func watchedReasons(t *testing.T, out string) []string {
	t.Helper()
	var reasons []string
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var o struct {
			Kind string `json:"kind"`
			Spec struct {
				Reason string `json:"reason"`
			} `json:"spec"`
			Object struct {
				Spec struct {
					Reason string `json:"reason"`
				} `json:"spec"`
			} `json:"object"`
		}
		if err := dec.Decode(&o); err != nil {
			return reasons // a line still being written
		}
		if r := o.Spec.Reason + o.Object.Spec.Reason; r != "" {
			reasons = append(reasons, r)
		}
	}
	return reasons
}
