package state

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func withHostname(nm *roostv1.NewMachine, host string) *roostv1.NewMachine {
	nm.Hostname = host
	return nm
}

// TestHostnameUniqueInPool: two Machines of one Pool cannot share a host
// name, given (spec.hostname) or defaulted (the Machine's name), in one
// command or across commands; other pools may reuse it.
func TestHostnameUniqueInPool(t *testing.T) {
	h := newHarness(t, Options{})
	explicitPool(h)
	h.mustApply(h.objects(poolObj("other", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil })))
	for i, u := range []string{uuidA, uuidB, uuidC} {
		availableServer(h, u, "52:54:00:00:00:0"+string(rune('1'+i)))
	}
	h.mustApply(createMachinesCmd(false, withHostname(newMachine("workers-abcde", uuidA, "workers"), "demo-1")))

	e := wantCode(t, h.apply(createMachinesCmd(false, withHostname(newMachine("workers-fghij", uuidB, "workers"), "Demo-1"))).Err, codes.AlreadyExists)
	if want := `spec.hostname: "Demo-1" is already used by Machine workers-abcde in pool workers`; e.Message != want {
		t.Errorf("message %q\nwant    %q", e.Message, want)
	}

	// A host name that is another Machine's name (its default host name),
	// and a new Machine whose name is taken as a host name, in one command:
	// nothing is created.
	e = wantCode(t, h.apply(createMachinesCmd(false,
		newMachine("workers-kmnpq", uuidB, "workers"),
		withHostname(newMachine("workers-rstvw", uuidC, "workers"), "workers-kmnpq"))).Err, codes.AlreadyExists)
	if want := `spec.hostname: "workers-kmnpq" is already used by Machine workers-kmnpq in pool workers (as its name: it sets no spec.hostname)`; e.Message != want {
		t.Errorf("message %q\nwant    %q", e.Message, want)
	}
	if _, err := h.f.Get("Machine", "workers-kmnpq"); err == nil {
		t.Error("a refused command created a Machine")
	}
	e = wantCode(t, h.apply(createMachinesCmd(false, newMachine("demo-1", uuidB, "workers"))).Err, codes.AlreadyExists)
	if !strings.HasPrefix(e.Message, `host name "demo-1" (the name of the new Machine) is already used by Machine workers-abcde`) {
		t.Errorf("message %q", e.Message)
	}

	// Another pool may use the name; a released Machine frees it.
	h.mustApply(createMachinesCmd(false, withHostname(newMachine("other-abcde", uuidB, "other"), "demo-1")))
	h.mustApply(deleteMachinesCmd("workers", []string{"workers-abcde"}, nil))
	h.mustApply(createMachinesCmd(false, withHostname(newMachine("workers-fghij", uuidC, "workers"), "demo-1")))
}
