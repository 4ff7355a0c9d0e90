package hub_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// anonFrom dials the hub without a certificate from the loopback address
// from (127.0.0.x: each is a source address of its own to the hub).
func (f *agentFixture) anonFrom(from string) (roostv1.AgentServiceClient, *grpc.ClientConn) {
	f.t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	cfg := &client.Config{Hubs: f.cfg.Hubs, CertificateAuthority: f.cfg.CertificateAuthority}
	conn, err := client.Dial(context.Background(), cfg, nil, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	return roostv1.NewAgentServiceClient(conn), conn
}

// heapInUse is the process's heap in use after a full collection, in bytes.
func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory() // a GC, and the RSS below without freed spans
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// vmRSS is the process's resident set (/proc/self/status VmRSS), in bytes;
// 0 where there is no /proc.
func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Acceptance 1 of issue 24: 10,000 enrollment attempts with unknown
// tokens and wrong secrets, from 8 source addresses at once, write
// nothing to Raft and leave the hub's heap (and, without the race
// detector, the process's RSS) within 10 MB, while real
// enrollments from another address succeed (retrying, as agents do, when
// a limit asks them to wait). Each attempt carries a 4 KB inventory.
func TestEnrollFloodWritesNothing(t *testing.T) {
	const (
		attempts  = 10_000
		sources   = 8
		workers   = 64
		real      = 20
		maxGrowth = 10 << 20
	)
	f := &agentFixture{t: t}
	f.h = startHub(t, t.TempDir(), hub.Options{
		// Limits high enough that most of the flood reaches the token
		// check (the path that used to write), low enough that some is
		// refused by them.
		Unauthenticated:   api.UnauthenticatedLimits{PerAddress: 1000, PerAddressBurst: 200, Global: 1500, GlobalBurst: 500},
		HeartbeatMinTTL:   time.Hour, // no reachability writes for the real Servers during the test
		LogVerifyInterval: -1,        // nor log verification checkpoints
	})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(f.h.AdminConfigPath()); return err == nil })
	cfg, err := client.LoadConfig(f.h.AdminConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	f.cfg, f.admin = cfg, dial(t, f.h.AdminConfigPath())
	good := f.token(&roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600})
	ctx := context.Background()

	var floods []roostv1.AgentServiceClient
	var conns []*grpc.ClientConn
	for i := range sources {
		c, conn := f.anonFrom(fmt.Sprintf("127.0.0.%d", i+2))
		floods, conns = append(floods, c), append(conns, conn)
	}
	realClient, _ := f.anonFrom("127.0.0.1")
	// Warm up every connection (TLS, HTTP/2, gRPC's buffers) so that the
	// measurement below counts what the flood leaves, not what it opens.
	for _, c := range floods {
		req, _ := enrollReq(t, "zzzzzz.0123456789abcdef", testUUID, "52:54:00:00:00:01")
		if _, err := c.Enroll(ctx, req); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("warm-up: %v", err)
		}
	}
	bigInventory := func(req *roostv1.EnrollRequest) {
		for i := range 16 {
			req.Inventory.Disks = append(req.Inventory.Disks, &roostv1.DiskInfo{Name: fmt.Sprintf("sd%d", i),
				Model: strings.Repeat("m", 100), Serial: strings.Repeat("s", 100), Wwn: fmt.Sprintf("0x5000c500%08x", i), SizeBytes: 1 << 40})
		}
	}
	reqs := make([]*roostv1.EnrollRequest, 2)
	reqs[0], _ = enrollReq(t, "zzzzzz.0123456789abcdef", testUUID, "52:54:00:00:00:01")   // unknown token
	reqs[1], _ = enrollReq(t, good[:7]+"0123456789abcdef", testUUID, "52:54:00:00:00:01") // wrong secret
	for _, r := range reqs {
		bigInventory(r)
	}

	index := f.h.Node().LastIndex()
	heap0, rss0 := heapInUse(), vmRSS()

	var denied, limited, other atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := floods[w%sources]
			for {
				n := next.Add(1)
				if n > attempts {
					return
				}
				_, err := c.Enroll(ctx, reqs[n%2])
				switch status.Code(err) {
				case codes.PermissionDenied:
					denied.Add(1)
					if msg := status.Convert(err).Message(); msg != state.EnrollmentTokenRefused && other.Add(1) == 1 {
						t.Errorf("flood attempt refused with %q, want %q for an unknown token and a wrong secret alike", msg, state.EnrollmentTokenRefused)
					}
				case codes.ResourceExhausted:
					limited.Add(1)
				default:
					if other.Add(1) == 1 {
						t.Errorf("flood attempt: %v, want PermissionDenied or ResourceExhausted", err)
					}
				}
			}
		}()
	}

	// Real enrollments during the flood, each retried on ResourceExhausted
	// after the wait its RetryInfo asks for.
	var enrolled, retries int
	var slowest time.Duration
	for i := range real {
		req, _ := enrollReq(t, good, fmt.Sprintf("4c4c4544-0042-3510-8052-%012d", i), fmt.Sprintf("52:54:00:00:10:%02x", i))
		began := time.Now()
		for {
			_, err := realClient.Enroll(ctx, req)
			if err == nil {
				enrolled++
				break
			}
			st := status.Convert(err)
			if st.Code() != codes.ResourceExhausted {
				t.Fatalf("real enrollment %d during the flood: %v", i, err)
			}
			retries++
			wait := 10 * time.Millisecond
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					wait = ri.GetRetryDelay().AsDuration()
				}
			}
			time.Sleep(wait)
		}
		slowest = max(slowest, time.Since(began))
		if next.Load() >= attempts {
			break
		}
	}
	wg.Wait()
	took := time.Since(start)
	for _, c := range conns {
		c.Close()
	}

	perSec := func(n int64) string { return fmt.Sprintf("%.0f/s", float64(n)/took.Seconds()) }
	t.Logf("flood: %d attempts from %d addresses in %v (%s): %d refused by the token check (%s), %d rate-limited (%s), %d other",
		attempts, sources, took.Round(time.Millisecond), perSec(attempts), denied.Load(), perSec(denied.Load()), limited.Load(), perSec(limited.Load()), other.Load())
	t.Logf("real enrollments during the flood: %d, %d retries after ResourceExhausted, slowest %v", enrolled, retries, slowest.Round(time.Millisecond))

	if got := f.h.Node().LastIndex(); got != index+uint64(enrolled) {
		t.Errorf("Raft last index went from %d to %d; want %d (only the %d real enrollments)", index, got, index+uint64(enrolled), enrolled)
	}
	if enrolled == 0 {
		t.Error("no real enrollment during the flood")
	}
	if n := f.servers(); n != enrolled {
		t.Errorf("%d Servers, want the %d enrolled", n, enrolled)
	}
	if denied.Load() == 0 || other.Load() != 0 {
		t.Errorf("flood outcomes: %d token refusals, %d other, want some token refusals and nothing else", denied.Load(), other.Load())
	}
	heap1, rss1 := heapInUse(), vmRSS()
	growth := int64(heap1) - int64(heap0)
	t.Logf("heap in use after GC: %.1f MB before, %.1f MB after (%+.1f MB); RSS %.1f MB before, %.1f MB after (%+.1f MB%s)",
		mb(heap0), mb(heap1), float64(growth)/(1<<20), mb(rss0), mb(rss1), (float64(rss1)-float64(rss0))/(1<<20), map[bool]string{true: "; race detector on: its shadow memory is in the RSS, which is not checked"}[raceEnabled])
	if growth > maxGrowth {
		t.Errorf("the heap grew by %.1f MB during the flood, want at most %d MB", float64(growth)/(1<<20), maxGrowth>>20)
	}
	if rssGrowth := int64(rss1) - int64(rss0); !raceEnabled && rss0 > 0 && rssGrowth > maxGrowth {
		t.Errorf("RSS grew by %.1f MB during the flood, want at most %d MB", float64(rssGrowth)/(1<<20), maxGrowth>>20)
	}
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }
