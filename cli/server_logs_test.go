package cli

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/client"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/syncbuf"
)

// cliJournal is the agent's journal here: it records the queries and
// prints a line per entry asked for; following, it prints one line and
// waits for the read to be canceled.
type cliJournal struct {
	mu       sync.Mutex
	last     agent.JournalQuery
	canceled chan struct{}
}

func (j *cliJournal) Read(ctx context.Context, q agent.JournalQuery, w io.Writer) error {
	j.mu.Lock()
	j.last = q
	j.mu.Unlock()
	if q.Follow {
		fmt.Fprintln(w, "following")
		<-ctx.Done()
		close(j.canceled)
		return nil
	}
	for i := range max(q.Lines, 2) {
		fmt.Fprintf(w, "entry %d boot=%d units=%s json=%v\n", i, q.Boot, strings.Join(q.Units, ","), q.JSON)
	}
	return nil
}

func (j *cliJournal) query() agent.JournalQuery {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// cliCommands fails dmesg and prints the other programs' command lines.
type cliCommands struct{}

func (cliCommands) Output(_ context.Context, _ int, _ []int, name string, args ...string) ([]byte, bool, error) {
	if name == "dmesg" {
		return nil, false, errors.New("dmesg: Operation not permitted")
	}
	return []byte(name + " " + strings.Join(args, " ") + "\n"), false, nil
}

// TestServerLogsAndBundleCommands runs roostctl server logs and server
// bundle against a real hub and a real agent (whose journal and programs
// are fakes): flags reach the agent as journalctl's query, bad flags are
// usage errors (exit 2), an unknown server is refused (exit 1), -f
// streams until canceled and stops the agent's reader, the bundle is
// written with a summary naming what failed, and both are in the audit
// log.
func TestServerLogsAndBundleCommands(t *testing.T) {
	h, config, run := realHubCLI(t)
	cfg, err := client.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tok, err := roostv1.NewHubServiceClient(conn).CreateEnrollmentToken(context.Background(), &roostv1.CreateEnrollmentTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	j := &cliJournal{canceled: make(chan struct{})}
	id, inv := agent.SimulatedServer(3, 1)
	a, err := agent.New(agent.Options{Hubs: []string{h.APIAddr()}, CA: []byte(cfg.CertificateAuthority), Token: tok.GetToken(), Store: &agent.MemStore{},
		Identity: id, Inventory: inv, Journal: j, Commands: cliCommands{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var name string
	deadline := time.Now().Add(20 * time.Second)
	for {
		if name == "" {
			resp, err := roostv1.NewHubServiceClient(conn).List(ctx, &roostv1.ListRequest{Kind: "Server"})
			if err == nil && len(resp.GetObjects()) == 1 {
				name = resp.GetObjects()[0].GetServer().GetMetadata().GetName()
			}
		}
		// the Server is recorded before its agent's stream is up
		if name != "" && run("server", "logs", name).code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's logs never became readable (server %q)", name)
		}
		time.Sleep(100 * time.Millisecond)
	}

	r := run("server", "logs", name, "-u", "kubelet", "-u", "containerd", "--boot", "-1", "-n", "3", "-o", "json")
	if r.code != 0 || r.out != "entry 0 boot=-1 units=kubelet,containerd json=true\nentry 1 boot=-1 units=kubelet,containerd json=true\nentry 2 boot=-1 units=kubelet,containerd json=true\n" {
		t.Errorf("logs: %d %q %q", r.code, r.out, r.err)
	}
	before := time.Now()
	if r := run("server", "logs", name, "--since", "30m"); r.code != 0 {
		t.Errorf("--since 30m: %d %q", r.code, r.err)
	}
	if since := j.query().Since; since.After(before.Add(-29*time.Minute)) || since.Before(before.Add(-31*time.Minute)) {
		t.Errorf("--since 30m reached the agent as %v", since)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--boot", "1"}, "boots count back"},
		{[]string{"--since", "yesterday-ish"}, "want a duration"},
		{[]string{"-f", "--boot", "-1"}, "--follow reads the current boot"},
		{[]string{"-o", "yaml"}, "want text or json"},
		{[]string{"-n", "-2"}, "--lines -2"},
	} {
		if r := run(append([]string{"server", "logs", name}, c.args...)...); r.code != ExitUsage || !strings.Contains(r.err, c.want) {
			t.Errorf("logs %v: %d %q, want exit 2 and %q", c.args, r.code, r.err, c.want)
		}
	}
	if r := run("server", "logs", "no-such-server"); r.code != ExitFailed || !strings.Contains(r.err, `server "no-such-server" not found`) {
		t.Errorf("unknown server: %d %q", r.code, r.err)
	}

	// -f streams until Ctrl-C, which stops journalctl on the server
	fctx, fcancel := context.WithCancel(context.Background())
	var out, errb syncbuf.Buffer
	res := make(chan result, 1)
	go func() { res <- runCLIStreams(fctx, "", &out, &errb, "--config", config, "server", "logs", name, "-f") }()
	for !strings.Contains(out.String(), "following\n") {
		select {
		case r := <-res:
			t.Fatalf("logs -f ended: %d %q %q", r.code, r.out, r.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	fcancel()
	if r := <-res; r.code != 0 {
		t.Errorf("logs -f after Ctrl-C: %d %q", r.code, r.err)
	}
	select {
	case <-j.canceled:
	case <-time.After(10 * time.Second):
		t.Error("the agent still reads the journal after roostctl ended")
	}

	// the bundle
	file := filepath.Join(t.TempDir(), "b.tar.gz")
	r = run("server", "bundle", name, "-o", file)
	if r.code != 0 || !strings.Contains(r.out, "saved the support bundle of server "+name+" to "+file) || !strings.Contains(r.out, "errors.txt:\n  dmesg.txt: dmesg: Operation not permitted\n") {
		t.Errorf("bundle: %d %q %q", r.code, r.out, r.err)
	}
	entries := map[string]bool{}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %v, want 0600", st.Mode().Perm())
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = true
	}
	for _, want := range []string{agent.BundleJournalThisBoot, agent.BundleJournalPreviousBoot, agent.BundleAgentState, agent.BundleInventory,
		agent.BundleBootEntries, agent.BundleAddresses, agent.BundleRoutes, agent.BundleUnitStatus, agent.BundleFailedUnits, agent.BundleErrors} {
		if !entries[want] {
			t.Errorf("bundle lacks %s: %v", want, entries)
		}
	}
	if r := run("server", "bundle", name, "-o", file); r.code != ExitUsage || !strings.Contains(r.err, "exists") {
		t.Errorf("bundle over an existing file: %d %q", r.code, r.err)
	}
	if r := run("server", "bundle", name, "-o", file, "--force"); r.code != 0 {
		t.Errorf("bundle --force: %d %q", r.code, r.err)
	}

	// reads of logs are audited, with the Server's name
	if r := run("audit", "-o", "json"); !strings.Contains(r.out, `"method": "/roost.v1.HubService/ReadServerLogs"`) ||
		!strings.Contains(r.out, `"method": "/roost.v1.HubService/CollectServerBundle"`) || !strings.Contains(r.out, `"name": "`+name+`"`) {
		t.Errorf("audit: %d %q", r.code, r.out)
	}
}
