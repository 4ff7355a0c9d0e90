package cli

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/syncbuf"
)

// stoppingHub is a fakeHub member that stops: once stop is called, every
// Watch (the open one too) ends with the hub's Unavailable notice, and the
// server goes away shortly after, as roost-hub's Close does.
type stoppingHub struct {
	*fakeHub
	srv      *grpc.Server
	stopping chan struct{}
	once     sync.Once
	froms    []uint64 // the from_index of every Watch
}

func (h *stoppingHub) stop() {
	h.once.Do(func() {
		close(h.stopping)
		go func() { time.Sleep(50 * time.Millisecond); h.srv.Stop() }()
	})
}

func (h *stoppingHub) Watch(req *roostv1.WatchRequest, stream grpc.ServerStreamingServer[roostv1.WatchEvent]) error {
	notice := status.Error(codes.Unavailable, "hub member hub-a"+stoppingSuffix)
	h.mu.Lock()
	h.froms = append(h.froms, req.GetFromIndex())
	h.mu.Unlock()
	select {
	case <-h.stopping:
		return notice
	default:
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.fakeHub.Watch(req, wrappedWatch{stream, ctx})
	if stream.Context().Err() == nil && ctx.Err() != nil {
		return notice
	}
	return err
}

type wrappedWatch struct {
	grpc.ServerStreamingServer[roostv1.WatchEvent]
	ctx context.Context
}

func (w wrappedWatch) Context() context.Context { return w.ctx }

// serveMembers serves hubs on loopback with one PKI; it returns a client
// configuration listing them all and their addresses.
func serveMembers(t *testing.T, hubs ...roostv1.HubServiceServer) (config string, addrs []string, srvs []*grpc.Server) {
	t.Helper()
	pki := newTestPKI(t)
	for _, h := range hubs {
		srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS13})))
		roostv1.RegisterHubServiceServer(srv, h)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(srv.Stop)
		addrs = append(addrs, ln.Addr().String())
		srvs = append(srvs, srv)
	}
	return pki.writeConfig(t, addrs...), addrs, srvs
}

func startWatch(ctx context.Context, args ...string) (out, errb *syncbuf.Buffer, done chan result) {
	out, errb, done = &syncbuf.Buffer{}, &syncbuf.Buffer{}, make(chan result, 1)
	go func() { done <- runCLIStreams(ctx, "", out, errb, args...) }()
	return out, errb, done
}

func waitOutput(t *testing.T, out *syncbuf.Buffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); out.String() != want; {
		if time.Now().After(deadline) {
			t.Fatalf("watch printed %q, want %q", out.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When the member a watch is on stops, the watch goes on from where it was
// on another member.
func TestWatchMovesToAnotherMemberWhenOneStops(t *testing.T) {
	hubs := []*stoppingHub{{fakeHub: newFakeHub(), stopping: make(chan struct{})}, {fakeHub: newFakeHub(), stopping: make(chan struct{})}}
	for _, h := range hubs {
		seedObjects(t, h.fakeHub)
		h.events = []*roostv1.WatchEvent{{Type: roostv1.WatchEvent_TYPE_DELETED, Object: h.objects["Pool/gpu"], Index: 9}}
	}
	config, _, srvs := serveMembers(t, hubs[0], hubs[1])
	hubs[0].srv, hubs[1].srv = srvs[0], srvs[1]
	watchRetry = 10 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb, done := startWatch(ctx, "--config", config, "get", "pools", "-w", "-o", "name")
	waitOutput(t, out, "added pool/gpu\nadded pool/workers\ndeleted pool/gpu\n")
	// Stop the member the watch is on.
	a, b := hubs[0], hubs[1]
	b.mu.Lock()
	onB := len(b.froms) > 0
	b.mu.Unlock()
	if onB {
		a, b = b, a
	}
	a.stop()
	// The watch goes on on the other member from where it was (index 9),
	// not over.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b.mu.Lock()
		froms := append([]uint64(nil), b.froms...)
		b.mu.Unlock()
		if len(froms) > 0 {
			if froms[0] != 9 {
				t.Errorf("the other member was asked from index %d, want 9", froms[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch did not move to the other member; stderr:\n%s", errb.String())
		}
	}
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the watch ended (exit %d): %s", r.code, errb.String())
	default:
	}
	cancel()
	if r := <-done; r.code != 0 || out.String() != "added pool/gpu\nadded pool/workers\ndeleted pool/gpu\n" {
		t.Errorf("exit %d, out %q, stderr %q", r.code, out.String(), errb.String())
	}
}

// When the only member stops, the watch ends at once with exit code 3,
// saying so.
func TestWatchEndsWhenTheOnlyMemberStops(t *testing.T) {
	a := &stoppingHub{fakeHub: newFakeHub(), stopping: make(chan struct{})}
	seedObjects(t, a.fakeHub)
	config, addrs, srvs := serveMembers(t, a)
	a.srv = srvs[0]
	watchRetry = 10 * time.Millisecond

	out, errb, done := startWatch(context.Background(), "--config", config, "get", "pools", "-w", "-o", "name")
	waitOutput(t, out, "added pool/gpu\nadded pool/workers\n")
	start := time.Now()
	a.stop()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch did not end after its only member stopped; stderr:\n%s", errb.String())
	}
	t.Logf("ended %s after the member stopped", time.Since(start).Round(time.Millisecond))
	want := "error: hub unreachable: the watch ended: hub member hub-a stopped, and no other hub member answered\n" +
		"  tried " + addrs[0] + " (from " + config + "): no other member answered; watch again once a member is back (--hub lists other members)\n"
	if r.code != ExitUnreachable || errb.String() != want {
		t.Errorf("exit %d, stderr\n%s\nwant exit %d, stderr\n%s", r.code, errb.String(), ExitUnreachable, want)
	}
}

// A watch that reaches no member for --timeout ends with exit code 3.
func TestWatchEndsWhenNoMemberAnswersForTimeout(t *testing.T) {
	f := newFakeHub()
	seedObjects(t, f)
	config, _, srvs := serveMembers(t, f)
	watchRetry = 10 * time.Millisecond

	out, errb, done := startWatch(context.Background(), "--config", config, "--timeout", "300ms", "get", "pools", "-w", "-o", "name")
	waitOutput(t, out, "added pool/gpu\nadded pool/workers\n")
	srvs[0].Stop() // gone without a word
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end")
	}
	if r.code != ExitUnreachable || !strings.Contains(errb.String(), "error: hub unreachable: the watch ended: no hub member answered for 300ms (--timeout)") {
		t.Errorf("exit %d, stderr %q", r.code, errb.String())
	}
}
