package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// fakeAgentService serves FetchArtifact from memory. It is a test double
// of the hub's handler (the agent may not import hub/).
type fakeAgentService struct {
	roostv1.UnimplementedAgentServiceServer

	blobs     map[string][]byte
	chunkSize int
	// breakAfter, while > 0, makes a call fail with Unavailable after
	// sending that many bytes; each broken call decrements breaks.
	breakAfter int
	breaks     int
	// lie serves this content instead of the stored one.
	lie []byte

	mu      sync.Mutex
	offsets []int64
}

func (f *fakeAgentService) FetchArtifact(req *roostv1.FetchArtifactRequest, stream grpc.ServerStreamingServer[roostv1.ArtifactChunk]) error {
	f.mu.Lock()
	f.offsets = append(f.offsets, req.GetOffset())
	breakNow := f.breaks > 0
	if breakNow {
		f.breaks--
	}
	f.mu.Unlock()
	data, ok := f.blobs[req.GetSha256()]
	if !ok {
		return status.Errorf(codes.NotFound, "artifact sha256 %s is not stored", req.GetSha256())
	}
	if f.lie != nil {
		data = f.lie
	}
	off := req.GetOffset()
	if off < 0 || off > int64(len(data)) {
		return status.Errorf(codes.InvalidArgument, "offset %d out of range", off)
	}
	sent := 0
	first := true
	for off < int64(len(data)) || first {
		end := min(off+int64(f.chunkSize), int64(len(data)))
		c := &roostv1.ArtifactChunk{Data: data[off:end]}
		if first {
			c.Size = int64(len(data))
			first = false
		}
		if err := stream.Send(c); err != nil {
			return err
		}
		sent += int(end - off)
		off = end
		if breakNow && sent >= f.breakAfter {
			return status.Error(codes.Unavailable, "connection reset (test)")
		}
	}
	return nil
}

func (f *fakeAgentService) calls() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.offsets...)
}

func serve(t *testing.T, svc *fakeAgentService) roostv1.AgentServiceClient {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	roostv1.RegisterAgentServiceServer(g, svc)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return roostv1.NewAgentServiceClient(conn)
}

func artifactOf(data []byte) *roostv1.Artifact {
	h := sha256.Sum256(data)
	return &roostv1.Artifact{Sha256: hex.EncodeToString(h[:]), Size: int64(len(data))}
}

func testData() []byte { return bytes.Repeat([]byte("roost-artifact-"), 2000) } // 30000 bytes

func fastFetcher(c roostv1.AgentServiceClient) *Fetcher {
	return &Fetcher{Client: c, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
}

func checkFile(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, content differs from the %d bytes served", p, len(got), len(want))
	}
	if _, err := os.Stat(p + ".partial"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial file left behind: %v", err)
	}
}

func TestFetch(t *testing.T) {
	data := testData()
	a := artifactOf(data)
	svc := &fakeAgentService{blobs: map[string][]byte{a.Sha256: data}, chunkSize: 4096}
	dir := t.TempDir()
	var last, total int64
	p, err := Fetch(context.Background(), serve(t, svc), a, dir, func(done, tot int64) { last, total = done, tot })
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, "sha256", a.Sha256) {
		t.Fatalf("path %s", p)
	}
	checkFile(t, p, data)
	if last != int64(len(data)) || total != int64(len(data)) {
		t.Fatalf("last progress %d/%d", last, total)
	}

	// Present already: no call.
	if _, err := Fetch(context.Background(), serve(t, svc), a, dir, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(svc.calls()); n != 1 {
		t.Fatalf("%d calls, want 1 (the second Fetch must use the cache)", n)
	}

	// A cached file of the wrong size is fetched again; with
	// VerifyExisting, one of the right size but wrong content too.
	if err := os.WriteFile(p, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fastFetcher(serve(t, svc)).Fetch(context.Background(), a, dir, nil); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, data)
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), len(data)), 0o600); err != nil {
		t.Fatal(err)
	}
	f := fastFetcher(serve(t, svc))
	f.VerifyExisting = true
	if _, err := f.Fetch(context.Background(), a, dir, nil); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, data)
	if n := len(svc.calls()); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}

func TestFetchResumesBrokenStream(t *testing.T) {
	data := testData()
	a := artifactOf(data)
	svc := &fakeAgentService{blobs: map[string][]byte{a.Sha256: data}, chunkSize: 1000, breakAfter: 7000, breaks: 2}
	dir := t.TempDir()
	p, err := fastFetcher(serve(t, svc)).Fetch(context.Background(), a, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, data)
	if got := svc.calls(); len(got) != 3 || got[0] != 0 || got[1] != 7000 || got[2] != 14000 {
		t.Fatalf("offsets %v, want [0 7000 14000]", got)
	}
}

func TestFetchResumesPartialFile(t *testing.T) {
	data := testData()
	a := artifactOf(data)
	svc := &fakeAgentService{blobs: map[string][]byte{a.Sha256: data}, chunkSize: 4096}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sha256", a.Sha256+".partial"), data[:12345], 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := fastFetcher(serve(t, svc)).Fetch(context.Background(), a, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, data)
	if got := svc.calls(); len(got) != 1 || got[0] != 12345 {
		t.Fatalf("offsets %v, want [12345]", got)
	}
}

func TestFetchDigestMismatch(t *testing.T) {
	data := testData()
	a := artifactOf(data)
	lie := bytes.Repeat([]byte("X"), len(data))
	svc := &fakeAgentService{blobs: map[string][]byte{a.Sha256: data}, chunkSize: 4096, lie: lie}
	dir := t.TempDir()
	_, err := fastFetcher(serve(t, svc)).Fetch(context.Background(), a, dir, nil)
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v, want ErrDigestMismatch", err)
	}
	if got := artifactOf(lie).Sha256; !strings.Contains(err.Error(), a.Sha256) || !strings.Contains(err.Error(), got) {
		t.Fatalf("error does not name the expected and the received digest: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "sha256")); len(entries) != 0 {
		t.Fatalf("%d files left in the cache", len(entries))
	}

	// A hub blob of another size is refused before anything is written.
	svc.lie = data[:100]
	if _, err := fastFetcher(serve(t, svc)).Fetch(context.Background(), a, dir, nil); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("wrong size: %v", err)
	}
}

func TestFetchPermanentErrors(t *testing.T) {
	svc := &fakeAgentService{blobs: map[string][]byte{}, chunkSize: 4096}
	c := serve(t, svc)
	a := artifactOf([]byte("missing"))
	_, err := fastFetcher(c).Fetch(context.Background(), a, t.TempDir(), nil)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("err = %v, want NotFound", err)
	}
	if n := len(svc.calls()); n != 1 {
		t.Fatalf("%d calls, want 1 (NotFound is not retried)", n)
	}
	for _, bad := range []*roostv1.Artifact{{Sha256: "abc", Size: 1}, {Sha256: strings.Repeat("A", 64)}, {Sha256: a.Sha256, Size: -1}} {
		if _, err := Fetch(context.Background(), c, bad, t.TempDir(), nil); !errors.Is(err, ErrInvalidArtifact) {
			t.Errorf("%v: err = %v, want ErrInvalidArtifact", bad, err)
		}
	}
}

func TestFetchGivesUpWithContext(t *testing.T) {
	data := testData()
	a := artifactOf(data)
	svc := &fakeAgentService{blobs: map[string][]byte{a.Sha256: data}, chunkSize: 1000, breakAfter: 1000, breaks: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	dir := t.TempDir()
	f := &Fetcher{Client: serve(t, svc), BaseDelay: 50 * time.Millisecond}
	_, err := f.Fetch(ctx, a, dir, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	// What arrived is kept for the next try.
	st, serr := os.Stat(filepath.Join(dir, "sha256", a.Sha256+".partial"))
	if serr != nil || st.Size() == 0 {
		t.Fatalf("partial file: %v", serr)
	}
}

// With MaxFailures, a hub that answers nothing ends the fetch after that
// many attempts in a row, with the last failure, long before ctx ends.
func TestFetchGivesUpOnAGoneHub(t *testing.T) {
	calls := 0
	f := &Fetcher{Client: goneHub{calls: &calls}, MaxFailures: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
	a := &roostv1.Artifact{Sha256: strings.Repeat("ab", 32), Size: 10}
	_, err := f.Fetch(context.Background(), a, t.TempDir(), nil)
	if err == nil || status.Code(errors.Unwrap(err)) != codes.Unavailable || calls != 3 {
		t.Fatalf("%d calls, err %v", calls, err)
	}
}

// goneHub is a hub whose every FetchArtifact fails as a dead member's do.
type goneHub struct {
	roostv1.AgentServiceClient
	calls *int
}

func (g goneHub) FetchArtifact(context.Context, *roostv1.FetchArtifactRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[roostv1.ArtifactChunk], error) {
	*g.calls++
	return nil, status.Error(codes.Unavailable, "connection refused")
}
