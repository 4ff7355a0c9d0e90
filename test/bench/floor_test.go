package bench

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/test/harness"
)

// envFloorServer, set to a directory in this test binary's environment,
// makes the binary run the bare gRPC server of grpcFloor (runFloorServer)
// with the certificates in that directory instead of its benchmarks.
const envFloorServer = "ROOST_BENCH_GRPC_FLOOR_SERVER"

// floorFiles are the PEM files grpcFloor writes for runFloorServer.
const (
	floorMemberCert = "member.crt"
	floorMemberKey  = "member.key"
	floorCA         = "ca.crt"
)

// floorSample is what runFloorServer reports on "mem": right after a
// forced collection, the live heap, the heap in spans in use, goroutine
// stacks (bytes), goroutines and open Connect streams.
type floorSample struct {
	HeapAlloc  uint64 `json:"heapAlloc"`
	HeapInuse  uint64 `json:"heapInuse"`
	StackInuse uint64 `json:"stackInuse"`
	Goroutines int    `json:"goroutines"`
	Streams    int64  `json:"streams"`
}

// floorService is AgentService cut to what every agent connection must
// do on any gRPC server: read the agent's messages (here, to drop them).
type floorService struct {
	roostv1.UnimplementedAgentServiceServer
	streams atomic.Int64
}

func (f *floorService) Connect(s roostv1.AgentService_ConnectServer) error {
	f.streams.Add(1)
	defer f.streams.Add(-1)
	for {
		if _, err := s.Recv(); err != nil {
			return nil
		}
	}
}

// runFloorServer serves floorService with the hub's transport options
// (api.TransportOptions), TLS configuration (ca.ServerTLS) and garbage
// collection (hub.TuneGC) on 127.0.0.1, prints "listening ADDR", and answers
// every "mem" line on stdin with "mem JSON" (a floorSample). It returns the
// process exit code when stdin closes.
func runFloorServer(dir string) int {
	hub.TuneGC()
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return data
	}
	caCert, err := tlsconfig.ParseCertificatePEM(read(floorCA))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	cfg, err := ca.ServerTLS(read(floorMemberCert), read(floorMemberKey), pool)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	svc := &floorService{}
	srv := grpc.NewServer(append(api.TransportOptions(), grpc.Creds(credentials.NewTLS(cfg)))...)
	roostv1.RegisterAgentServiceServer(srv, svc)
	go srv.Serve(lis)
	fmt.Printf("listening %s\n", lis.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "mem" {
			continue
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		out, _ := json.Marshal(floorSample{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse,
			Goroutines: runtime.NumGoroutine(), Streams: svc.streams.Load()})
		fmt.Printf("mem %s\n", out)
		if dir := os.Getenv("ROOST_BENCH_PROFILES"); dir != "" && svc.streams.Load() > 0 {
			if err := writeHeapProfile(filepath.Join(dir, "grpc-floor-heap.pb.gz")); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	srv.Stop()
	return 0
}

// writeHeapProfile writes this process's heap profile (pprof format) to
// file, making its directory.
func writeHeapProfile(file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// floorProc is a running runFloorServer process.
type floorProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	addr  string
}

func (p *floorProc) mem(b *testing.B) floorSample {
	b.Helper()
	if _, err := io.WriteString(p.stdin, "mem\n"); err != nil {
		b.Fatalf("floor server: %v", err)
	}
	for p.out.Scan() {
		if v, ok := strings.CutPrefix(p.out.Text(), "mem "); ok {
			var s floorSample
			if err := json.Unmarshal([]byte(v), &s); err != nil {
				b.Fatalf("floor server: %v", err)
			}
			return s
		}
	}
	b.Fatalf("floor server exited: %v", p.out.Err())
	return floorSample{}
}

// floorResult is grpcFloor's cost per connection, in KiB.
type floorResult struct {
	rss, heap, live, stack, goroutines float64
}

// grpcFloor measures what n idle agent connections cost a gRPC server by
// themselves: a separate process serving AgentService.Connect with nothing
// behind it (floorService), with the hub's transport options, TLS
// configuration and GOGC, and n clients in this process dialing it as
// agents do (agent.TransportDialOptions, mutual TLS 1.3 with an agent
// certificate from a hub CA), each holding one stream and sending a
// heartbeat every 10 s. The difference to the hub's figure is what Roost
// adds per agent.
func grpcFloor(b *testing.B, n int) floorResult {
	b.Helper()
	dir := b.TempDir()
	now := time.Now()
	caProto, err := ca.New("roost-bench", now)
	if err != nil {
		b.Fatal(err)
	}
	authority, err := ca.Load(caProto)
	if err != nil {
		b.Fatal(err)
	}
	memberCert, memberKey, err := authority.Issue(ca.Profile{CommonName: "bench-member", Role: ca.RoleMember, Lifetime: 24 * time.Hour,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}, now)
	if err != nil {
		b.Fatal(err)
	}
	csr, agentKey, err := ca.NewCSR("bench-agent")
	if err != nil {
		b.Fatal(err)
	}
	agentCert, err := authority.SignCSR(csr, ca.Profile{CommonName: "bench-agent", Role: ca.RoleAgent, Lifetime: 24 * time.Hour}, now)
	if err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{floorMemberCert: memberCert, floorMemberKey: memberKey, floorCA: authority.CertificatePEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	clientTLS, err := tlsconfig.ClientTLS(agentCert, agentKey, authority.CertPool())
	if err != nil {
		b.Fatal(err)
	}
	p := startFloorServer(b, dir)
	time.Sleep(2 * time.Second)
	rss0, err := harness.RSSBytes(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	idle := p.mem(b)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	conns := make([]*grpc.ClientConn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	sem := make(chan struct{}, 64)
	var failed atomic.Int64
	for i := 0; i < n; i++ {
		conn, err := grpc.NewClient("passthrough:///"+p.addr,
			append(agent.TransportDialOptions(), grpc.WithTransportCredentials(credentials.NewTLS(clientTLS.Clone())))...)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, conn)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			floorAgent(ctx, conn, sem, &failed)
		}()
	}
	deadline := time.Now().Add(10 * time.Minute)
	s := p.mem(b)
	for ; s.Streams < int64(n) && time.Now().Before(deadline) && failed.Load() == 0; s = p.mem(b) {
		time.Sleep(time.Second)
	}
	if s.Streams < int64(n) {
		b.Fatalf("only %d of %d streams open (%d agents failed)", s.Streams, n, failed.Load())
	}
	report(b, "%d connections open after %.1f s", n, time.Since(start).Seconds())
	time.Sleep(20 * time.Second) // settle, as the fleet part does
	rss1, err := harness.RSSBytes(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	full := p.mem(b)
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) / 1024 }
	r := floorResult{
		rss:        float64(rss1-rss0) / float64(n) / 1024,
		heap:       per(full.HeapInuse, idle.HeapInuse),
		live:       per(full.HeapAlloc, idle.HeapAlloc),
		stack:      per(full.StackInuse, idle.StackInuse),
		goroutines: float64(full.Goroutines-idle.Goroutines) / float64(n),
	}
	return r
}

// floorAgent holds one Connect stream on conn and sends a heartbeat every
// 10 s (first after a random part of it), until ctx ends. It releases sem
// once the stream is open.
func floorAgent(ctx context.Context, conn *grpc.ClientConn, sem chan struct{}, failed *atomic.Int64) {
	stream, err := roostv1.NewAgentServiceClient(conn).Connect(ctx)
	if err == nil {
		err = stream.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: "bench-agent", AgentVersion: "bench"}}})
	}
	<-sem
	if err != nil {
		if ctx.Err() == nil {
			failed.Add(1)
		}
		return
	}
	t := time.NewTimer(rand.N(10 * time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := stream.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{SentAt: timestamppb.Now()}}}); err != nil {
			if ctx.Err() == nil {
				failed.Add(1)
			}
			return
		}
		t.Reset(10 * time.Second)
	}
}

// startFloorServer starts this test binary as runFloorServer on dir and
// waits for its address.
func startFloorServer(b *testing.B, dir string) *floorProc {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), envFloorServer+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	p := &floorProc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	for p.out.Scan() {
		if v, ok := strings.CutPrefix(p.out.Text(), "listening "); ok {
			p.addr = v
			return p
		}
	}
	b.Fatalf("floor server did not start: %v", p.out.Err())
	return nil
}
