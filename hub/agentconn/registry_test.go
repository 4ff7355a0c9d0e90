package agentconn

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// recorder is a stream's send that keeps what it was given, or fails.
type recorder struct {
	sent []*roostv1.HubMessage
	err  error
}

func (r *recorder) send(m *roostv1.HubMessage) error {
	if r.err != nil {
		return r.err
	}
	r.sent = append(r.sent, m)
	return nil
}

func newRegistry() *Registry { return New(Config{FSM: state.New(state.Options{})}) }

func TestRegistryKeepsTheNewestStream(t *testing.T) {
	r := newRegistry()
	older, newer := NewStream((&recorder{}).send), NewStream((&recorder{}).send)
	r.Register("s1", older)
	r.Register("s1", newer)
	r.Unregister("s1", older) // the old stream's loop ends after the new one registered
	if r.Len() != 1 || r.get("s1") != newer {
		t.Fatalf("after the older stream unregistered: %d streams, s1 = %p, want the newer %p", r.Len(), r.get("s1"), newer)
	}
	r.Unregister("s1", newer)
	if r.Len() != 0 {
		t.Fatalf("%d streams after both unregistered", r.Len())
	}
}

func TestPushSendsOnlyChanges(t *testing.T) {
	r := newRegistry()
	rec := &recorder{}
	st := NewStream(rec.send)
	for range 2 {
		if err := r.Push("s1", st); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.sent) != 1 || rec.sent[0].GetDesired() == nil || rec.sent[0].GetDesired().GetRevision() != 0 {
		t.Fatalf("sent %v, want one empty desired state (no Revision)", rec.sent)
	}
	broken := errors.New("stream broken")
	failing := NewStream((&recorder{err: broken}).send)
	if err := r.Push("s2", failing); !errors.Is(err, broken) {
		t.Fatalf("push on a broken stream: %v, want its error", err)
	}
	if failing.last != nil {
		t.Error("a desired state that was not sent is remembered as sent")
	}
}

func TestGoAwayCountsTheAgentsTold(t *testing.T) {
	r := newRegistry()
	ok := &recorder{}
	r.Register("s1", NewStream(ok.send))
	r.Register("s2", NewStream((&recorder{err: errors.New("gone")}).send))
	if n := r.GoAway("stopping"); n != 1 {
		t.Fatalf("GoAway told %d agents, want 1", n)
	}
	if len(ok.sent) != 1 || ok.sent[0].GetGoAway().GetReason() != "stopping" {
		t.Fatalf("sent %v, want one GoAway with the reason", ok.sent)
	}
}

func TestStatusUpdateOfUnknownServer(t *testing.T) {
	upd, err := newRegistry().StatusUpdate("missing", &roostv1.AgentStatus{BootedRevision: 1})
	if apierror.Code(err) != codes.NotFound || upd != nil {
		t.Fatalf("StatusUpdate of a Server not recorded: %v, %v; want NotFound", upd, err)
	}
}
