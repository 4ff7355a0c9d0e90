package hub_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// fakeJournal is the agent's journal in these tests: it records each
// query, writes "line N of <query>" lines (size bytes in all when size >
// 0), and in follow mode writes one line and then waits for the read to
// be canceled.
type fakeJournal struct {
	mu       sync.Mutex
	queries  []agent.JournalQuery
	size     int64
	written  atomic.Int64
	canceled chan struct{} // closed when a follow read saw its context end
}

func (j *fakeJournal) Read(ctx context.Context, q agent.JournalQuery, w io.Writer) error {
	j.mu.Lock()
	j.queries = append(j.queries, q)
	size := j.size
	j.mu.Unlock()
	if q.Boot < -5 {
		return errors.New("no such boot")
	}
	if q.Follow {
		if _, err := fmt.Fprintf(w, "following units=%v\n", q.Units); err != nil {
			return err
		}
		<-ctx.Done()
		close(j.canceled)
		return nil
	}
	if size > 0 {
		buf := bytes.Repeat([]byte("x"), 1023)
		buf = append(buf, '\n')
		for n := int64(0); n < size; n += int64(len(buf)) {
			m, err := w.Write(buf)
			j.written.Add(int64(m))
			if err != nil {
				return err
			}
		}
		return nil
	}
	for i := range max(q.Lines, 3) {
		if _, err := fmt.Fprintf(w, "line %d boot=%d units=%v json=%v\n", i, q.Boot, q.Units, q.JSON); err != nil {
			return err
		}
	}
	return nil
}

func (j *fakeJournal) lastQuery() agent.JournalQuery {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.queries[len(j.queries)-1]
}

// fakeCommands answers the bundle's programs: "dmesg" fails, the rest
// print their command line.
type fakeCommands struct{}

func (fakeCommands) Output(_ context.Context, _ int, _ []int, name string, args ...string) ([]byte, bool, error) {
	if name == "dmesg" {
		return nil, false, errors.New("dmesg: read kernel buffer failed: Operation not permitted")
	}
	return []byte(name + " " + strings.Join(args, " ") + "\n"), false, nil
}

// startTestAgent enrolls and runs a real agent against hubAddrs (first
// one first), with j as its journal; it returns the Server's name once
// it is recorded, and stop, which stops the agent (also done at cleanup).
func startTestAgent(t *testing.T, admin roostv1.HubServiceClient, cfgPath string, j agent.Journal, uuid string, hubAddrs ...string) (name string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id, inv := agent.SimulatedServer(7, 1)
	id.UUID = uuid
	a, err := agent.New(agent.Options{Hubs: hubAddrs, CA: []byte(cfg.CertificateAuthority), Token: tok.GetToken(), Store: &agent.MemStore{},
		Identity: id, Inventory: inv, Journal: j, Commands: fakeCommands{}, RebalanceInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	waitFor(t, "the agent's Server", func() bool {
		resp, err := admin.List(ctx, &roostv1.ListRequest{Kind: "Server"})
		for _, o := range resp.GetObjects() {
			if err == nil && o.GetServer().GetSpec().GetSystemUuid() == uuid {
				name = o.GetServer().GetMetadata().GetName()
			}
		}
		return name != ""
	})
	return name, stop
}

// readLogs reads a whole ReadServerLogs stream.
func readLogs(ctx context.Context, c roostv1.HubServiceClient, req *roostv1.ReadServerLogsRequest) (string, bool, error) {
	st, err := c.ReadServerLogs(ctx, req)
	if err != nil {
		return "", false, err
	}
	var b bytes.Buffer
	truncated := false
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), truncated, nil
		}
		if err != nil {
			return b.String(), truncated, err
		}
		b.Write(ch.GetData())
		truncated = truncated || ch.GetTruncated()
	}
}

// waitLogs reads logs until the agent's stream is up (FailedPrecondition
// before) and the member asked knows the Server (a follower may not have
// applied its enrollment yet: NotFound).
func waitLogs(t *testing.T, c roostv1.HubServiceClient, req *roostv1.ReadServerLogsRequest) string {
	t.Helper()
	var out string
	var err error
	waitFor(t, "logs through the agent's stream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, _, err = readLogs(ctx, c, req)
		return status.Code(err) != codes.FailedPrecondition && status.Code(err) != codes.NotFound
	})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	return out
}

// TestServerLogsAndBundle reads a Server's journal and support bundle
// through a real hub and a real agent (with a fake journal): the query
// reaches the agent as asked, --follow streams until the caller cancels
// and then stops the agent's reader, a reader that does not read holds
// the agent back instead of filling the hub (and the hub holds nothing
// once the reads end), max_bytes cuts the data, and the bundle is a
// tar.gz whose errors.txt names the entry that failed.
func TestServerLogsAndBundle(t *testing.T) {
	h := startHub(t, t.TempDir(), hub.Options{})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	admin := dial(t, h.AdminConfigPath())
	j := &fakeJournal{canceled: make(chan struct{})}
	name, _ := startTestAgent(t, admin, h.AdminConfigPath(), j, "9a0e3c2a-52d1-4b7e-9a51-00000000a001", h.APIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	out := waitLogs(t, admin, &roostv1.ReadServerLogsRequest{Server: name, Units: []string{"kubelet"}, Boot: -1, Lines: 4, Json: true})
	if want := "line 3 boot=-1 units=[kubelet] json=true\n"; !strings.HasSuffix(out, want) || strings.Count(out, "\n") != 4 {
		t.Errorf("logs:\n%s\nwant 4 lines ending in %q", out, want)
	}

	// bad requests are refused at the hub, naming the field
	for _, req := range []*roostv1.ReadServerLogsRequest{
		{Server: name, Boot: 1}, {Server: name, Units: []string{"-x"}}, {Server: name, Follow: true, Boot: -1}, {Server: name, Lines: -1},
	} {
		if _, _, err := readLogs(ctx, admin, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", req, err)
		}
	}
	if _, _, err := readLogs(ctx, admin, &roostv1.ReadServerLogsRequest{Server: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown server: %v", err)
	}
	// a journal that fails: the agent's error reaches the caller
	if _, _, err := readLogs(ctx, admin, &roostv1.ReadServerLogsRequest{Server: name, Boot: -9}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no such boot") {
		t.Errorf("failing journal: %v", err)
	}

	// follow: streams until the caller cancels, which stops the reader
	fctx, fcancel := context.WithCancel(ctx)
	st, err := admin.ReadServerLogs(fctx, &roostv1.ReadServerLogsRequest{Server: name, Follow: true, Units: []string{"roost-agent"}})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st.Recv(); err != nil || string(c.GetData()) != "following units=[roost-agent]\n" {
		t.Fatalf("follow: %q %v", c.GetData(), err)
	}
	fcancel()
	select {
	case <-j.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's journal reader still runs after the caller canceled")
	}

	// back-pressure: a caller that does not read holds the agent back
	j.mu.Lock()
	j.size = 16 << 20
	j.mu.Unlock()
	slow, err := admin.ReadServerLogs(ctx, &roostv1.ReadServerLogsRequest{Server: name})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	// the hub queues 2 chunks of 16 KiB; gRPC buffers about 64 KiB on
	// the way to the caller
	if n := j.written.Load(); n > 512<<10 {
		t.Errorf("the agent wrote %d bytes to a caller that read nothing", n)
	}
	var got int64
	for {
		c, err := slow.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got += int64(len(c.GetData()))
	}
	if got != j.written.Load() || got < 16<<20 {
		t.Errorf("read %d bytes, the agent wrote %d", got, j.written.Load())
	}

	// max_bytes cuts the read, and says so
	data, truncated, err := readLogs(ctx, admin, &roostv1.ReadServerLogsRequest{Server: name, MaxBytes: 100 << 10})
	if err != nil || !truncated || len(data) != 100<<10 {
		t.Errorf("max_bytes: %d bytes, truncated %v, %v", len(data), truncated, err)
	}
	j.mu.Lock()
	j.size = 0
	j.mu.Unlock()

	// the bundle
	bs, err := admin.CollectServerBundle(ctx, &roostv1.CollectServerBundleRequest{Server: name})
	if err != nil {
		t.Fatal(err)
	}
	var bundle bytes.Buffer
	for {
		c, err := bs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		bundle.Write(c.GetData())
	}
	entries := untar(t, bundle.Bytes())
	for _, want := range []string{agent.BundleJournalThisBoot, agent.BundleJournalPreviousBoot, agent.BundleAgentState, agent.BundleInventory,
		agent.BundleBootEntries, agent.BundleAddresses, agent.BundleLinks, agent.BundleRoutes, agent.BundleUnitStatus, agent.BundleErrors} {
		if _, ok := entries[want]; !ok {
			t.Errorf("the bundle lacks %s: %v", want, keys(entries))
		}
	}
	if _, ok := entries[agent.BundleDmesg]; ok {
		t.Error("the bundle holds dmesg.txt, whose command failed")
	}
	if e := entries[agent.BundleErrors]; !strings.Contains(e, "dmesg.txt: dmesg: read kernel buffer failed") {
		t.Errorf("errors.txt:\n%s", e)
	}
	if s := entries[agent.BundleAgentState]; !strings.Contains(s, `"serverName": "`+name+`"`) || strings.Contains(s, "PRIVATE KEY") {
		t.Errorf("agent/state.json:\n%s", s)
	}
	if s := entries[agent.BundleJournalPreviousBoot]; !strings.Contains(s, "boot=-1") {
		t.Errorf("previous boot's journal:\n%s", s)
	}
	if s := entries[agent.BundleUnitStatus]; !strings.HasPrefix(s, "systemctl status --no-pager --full --lines=50 kubelet.service containerd.service") {
		t.Errorf("unit status: %q", s)
	}
	waitFor(t, "no data request left on the hub", func() bool { return h.Agents().DataRequests() == 0 })
}

// TestServerLogsFromAnotherMember: the agent streams to one member, the
// caller asks another: the call is passed to the member holding the
// stream, with the caller's identity; with the agent gone, the caller is
// told no member holds its stream.
func TestServerLogsFromAnotherMember(t *testing.T) {
	first := startHub(t, t.TempDir(), hub.Options{})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(first.AdminConfigPath()); return err == nil })
	admin := dial(t, first.AdminConfigPath())
	jt, err := admin.CreateJoinToken(context.Background(), &roostv1.CreateJoinTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	second := startHub(t, t.TempDir(), hub.Options{Join: first.APIAddr(), JoinToken: jt.GetToken()})
	waitFor(t, "two members with API addresses", func() bool {
		n := 0
		for _, m := range first.FSM().Members() {
			if m.GetApiAddress() != "" {
				n++
			}
		}
		return n == 2
	})
	j := &fakeJournal{canceled: make(chan struct{})}
	name, stop := startTestAgent(t, admin, first.AdminConfigPath(), j, "9a0e3c2a-52d1-4b7e-9a51-00000000a002", first.APIAddr())
	// the agent streams to one member (its first choice, once it learned
	// the members: it may move once); ask the other
	var holder, other *hub.Hub
	var since time.Time
	waitFor(t, "the agent's stream on one member for a second", func() bool {
		h, o := first, second
		switch {
		case first.Agents().Len() == 1 && second.Agents().Len() == 0:
		case second.Agents().Len() == 1 && first.Agents().Len() == 0:
			h, o = second, first
		default:
			holder = nil
			return false
		}
		if h != holder {
			holder, other, since = h, o, time.Now()
		}
		return time.Since(since) > time.Second
	})
	via := dial(t, first.AdminConfigPath(), other.APIAddr())
	out := waitLogs(t, via, &roostv1.ReadServerLogsRequest{Server: name, Units: []string{"kubelet"}})
	if !strings.Contains(out, "line 2 boot=0 units=[kubelet]") {
		t.Errorf("logs through the other member:\n%s", out)
	}
	if holder.Agents().Len() != 1 {
		t.Errorf("the agent moved during the test")
	}

	// the agent gone: no member holds its stream, and the caller is told
	stop()
	waitFor(t, "the agent's stream to end", func() bool { return first.Agents().Len()+second.Agents().Len() == 0 })
	_, _, err = readLogs(context.Background(), via, &roostv1.ReadServerLogsRequest{Server: name})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "is connected to no hub member") {
		t.Errorf("logs of a Server whose agent is gone: %v", err)
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = string(data)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
