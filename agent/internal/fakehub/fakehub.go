// Package fakehub is a test double of the hub's AgentService for the
// agent's and the simulator's unit tests: it isolates the agent's logic
// (enroll, renew, stream) from the real hub. It has its own minimal CA; it
// imports nothing from hub/.
package fakehub

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/agent"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// testCA is a minimal CA for the fake hub (the agent's tests do not use
// hub/ca, as the agent does not).
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
}

func NewCA(t testing.TB) *CA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

var serial atomic.Int64

func (c *CA) Sign(t testing.TB, pub any, cn, role string, life time.Duration, server bool) []byte {
	notBefore := time.Now().Add(-time.Second)
	if life < 0 { // an expired certificate
		notBefore = time.Now().Add(2 * life)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(100 + serial.Add(1)), Subject: pkix.Name{CommonName: cn, Organization: []string{role}},
		NotBefore: notBefore, NotAfter: time.Now().Add(life),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{agent.HubServerName}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (c *CA) SignCSR(t testing.TB, csrPEM []byte, cn string, life time.Duration) ([]byte, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil {
		return nil, status.Error(codes.InvalidArgument, "csr: no PEM")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil || csr.CheckSignature() != nil {
		return nil, status.Error(codes.InvalidArgument, "csr: bad")
	}
	return c.Sign(t, csr.PublicKey, cn, agent.RoleAgent, life, false), nil
}

// fakeHub is a test double of the hub's AgentService, for isolating the
// agent's logic: it enrolls with one token, renews, and records streams.
type Hub struct {
	roostv1.UnimplementedAgentServiceServer
	t      testing.TB
	ca     *CA
	Addr   string
	Srv    *grpc.Server
	Token  string
	Life   time.Duration // certificate lifetime
	Hubs   []string      // returned at enrollment
	Beat   int64         // heartbeat_interval_seconds sent first
	Refuse error         // returned by Enroll when set
	// RefuseConnect is returned by Connect when set (a decommissioned or
	// deleted Server); guarded by Mu.
	RefuseConnect error

	Mu          sync.Mutex
	Unavailable bool // Connect answers Unavailable
	// Lost makes Connect answer NotFound, as a hub that has no record of
	// the Server, until the agent re-registers it (Reregisters).
	Lost        bool
	Reregisters []*roostv1.ReregisterRequest
	Enrolls     []*roostv1.EnrollRequest
	Renewals    int
	Hellos      []*roostv1.Hello
	HelloPeers  []string // client certificate CN of each stream
	Statuses    []*roostv1.AgentStatus
	// CleaningResults are the cleaning results agents sent, in order.
	CleaningResults []*roostv1.CleaningResult
	Heartbeats      int
	Streams         []chan *roostv1.HubMessage
	// DataChunks are the agent's answers to log and bundle requests.
	DataChunks []*roostv1.DataChunk

	// Blobs are served by FetchArtifact, by sha256 (set before the agent
	// fetches, or under Mu).
	Blobs map[string][]byte
	// Lease answers AcquireLease call number n (from 0); nil grants every
	// call with fencing token 100+n. Set before the agent asks, or under Mu.
	Lease func(n int, req *roostv1.AcquireLeaseRequest) (*roostv1.AcquireLeaseResponse, error)
	// LeaseRequests are the AcquireLease calls so far.
	LeaseRequests []*roostv1.AcquireLeaseRequest
	// Fetches are the sha256 digests FetchArtifact was asked for.
	Fetches []string
}

// FetchArtifact streams a blob from Blobs in 64 KiB chunks from the
// requested offset; the first chunk carries the size.
func (h *Hub) FetchArtifact(req *roostv1.FetchArtifactRequest, stream grpc.ServerStreamingServer[roostv1.ArtifactChunk]) error {
	if peerCN(stream.Context()) == "" {
		return status.Error(codes.Unauthenticated, "no client certificate")
	}
	h.Mu.Lock()
	data, ok := h.Blobs[req.GetSha256()]
	h.Fetches = append(h.Fetches, req.GetSha256())
	h.Mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "artifact sha256 %s is not stored", req.GetSha256())
	}
	off := req.GetOffset()
	if off < 0 || off > int64(len(data)) {
		return status.Errorf(codes.InvalidArgument, "offset %d out of range", off)
	}
	first := true
	for off < int64(len(data)) || first {
		end := min(off+64<<10, int64(len(data)))
		c := &roostv1.ArtifactChunk{Data: data[off:end]}
		if first {
			c.Size, first = int64(len(data)), false
		}
		if err := stream.Send(c); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// AcquireLease records the request and answers with Lease.
func (h *Hub) AcquireLease(ctx context.Context, req *roostv1.AcquireLeaseRequest) (*roostv1.AcquireLeaseResponse, error) {
	if peerCN(ctx) == "" {
		return nil, status.Error(codes.Unauthenticated, "no client certificate")
	}
	h.Mu.Lock()
	n := len(h.LeaseRequests)
	h.LeaseRequests = append(h.LeaseRequests, req)
	answer := h.Lease
	h.Mu.Unlock()
	if answer == nil {
		return &roostv1.AcquireLeaseResponse{Granted: true, FencingToken: uint64(100 + n)}, nil
	}
	return answer(n, req)
}

// Leases returns the AcquireLease requests so far.
func (h *Hub) Leases() []*roostv1.AcquireLeaseRequest {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	return append([]*roostv1.AcquireLeaseRequest(nil), h.LeaseRequests...)
}

// LastStatus returns the newest status the agent sent, or nil.
func (h *Hub) LastStatus() *roostv1.AgentStatus {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	if len(h.Statuses) == 0 {
		return nil
	}
	return h.Statuses[len(h.Statuses)-1]
}

func Start(t testing.TB, ca *CA) *Hub {
	t.Helper()
	h := &Hub{t: t, ca: ca, Token: "abcdef.0123456789abcdef", Life: time.Hour, Beat: 1}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	certPEM := ca.Sign(t, key.Public(), "hub-1", agent.RoleMember, time.Hour, true)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	h.Srv = grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	roostv1.RegisterAgentServiceServer(h.Srv, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.Addr = ln.Addr().String()
	go h.Srv.Serve(ln)
	t.Cleanup(h.Srv.Stop)
	return h
}

func peerCN(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return ""
	}
	return ti.State.VerifiedChains[0][0].Subject.CommonName
}

func (h *Hub) Enroll(ctx context.Context, req *roostv1.EnrollRequest) (*roostv1.EnrollResponse, error) {
	h.Mu.Lock()
	h.Enrolls = append(h.Enrolls, req)
	h.Mu.Unlock()
	if h.Refuse != nil {
		return nil, h.Refuse
	}
	if req.GetToken() != h.Token {
		return nil, status.Error(codes.PermissionDenied, "unknown enrollment token")
	}
	name := req.GetIdentity().GetSystemUuid()
	cert, err := h.ca.SignCSR(h.t, req.GetCsrPem(), name, h.Life)
	if err != nil {
		return nil, err
	}
	return &roostv1.EnrollResponse{ServerName: name, CertificatePem: cert, CaBundlePem: h.ca.CertPEM, Hubs: h.Hubs}, nil
}

func (h *Hub) RenewCertificate(ctx context.Context, req *roostv1.RenewCertificateRequest) (*roostv1.RenewCertificateResponse, error) {
	cn := peerCN(ctx)
	if cn == "" {
		return nil, status.Error(codes.Unauthenticated, "no client certificate")
	}
	cert, err := h.ca.SignCSR(h.t, req.GetCsrPem(), cn, h.Life)
	if err != nil {
		return nil, err
	}
	h.Mu.Lock()
	h.Renewals++
	h.Mu.Unlock()
	return &roostv1.RenewCertificateResponse{CertificatePem: cert, CaBundlePem: h.ca.CertPEM}, nil
}

func (h *Hub) Connect(stream roostv1.AgentService_ConnectServer) error {
	cn := peerCN(stream.Context())
	if cn == "" {
		return status.Error(codes.Unauthenticated, "no client certificate")
	}
	h.Mu.Lock()
	unavailable, refuse, lost := h.Unavailable, h.RefuseConnect, h.Lost
	h.Mu.Unlock()
	if refuse != nil {
		return refuse
	}
	if lost {
		return status.Errorf(codes.NotFound, "server %s is not enrolled: the hub has no record of it", cn)
	}
	if unavailable {
		return status.Error(codes.Unavailable, "not the leader")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "hello first")
	}
	out := make(chan *roostv1.HubMessage, 8)
	h.Mu.Lock()
	h.Hellos = append(h.Hellos, hello)
	h.HelloPeers = append(h.HelloPeers, cn)
	h.Streams = append(h.Streams, out)
	h.Mu.Unlock()
	if err := stream.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_HeartbeatIntervalSeconds{HeartbeatIntervalSeconds: h.Beat}}); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			h.Mu.Lock()
			switch {
			case m.GetStatus() != nil:
				h.Statuses = append(h.Statuses, m.GetStatus())
			case m.GetHeartbeat() != nil:
				h.Heartbeats++
			case m.GetCleaningResult() != nil:
				h.CleaningResults = append(h.CleaningResults, m.GetCleaningResult())
			case m.GetDataChunk() != nil:
				h.DataChunks = append(h.DataChunks, m.GetDataChunk())
			}
			h.Mu.Unlock()
		}
	}()
	for {
		select {
		case err := <-errc:
			return err
		case m := <-out:
			if err := stream.Send(m); err != nil {
				return err
			}
		}
	}
}

// Reregister records the calling Server again while Lost.
func (h *Hub) Reregister(ctx context.Context, req *roostv1.ReregisterRequest) (*roostv1.ReregisterResponse, error) {
	cn := peerCN(ctx)
	h.Mu.Lock()
	defer h.Mu.Unlock()
	if !h.Lost {
		return nil, status.Errorf(codes.AlreadyExists, "server %s is enrolled", cn)
	}
	h.Lost = false
	h.Reregisters = append(h.Reregisters, req)
	return &roostv1.ReregisterResponse{ServerName: cn}, nil
}

// send pushes a message down the newest stream.
func (h *Hub) Send(m *roostv1.HubMessage) {
	h.Mu.Lock()
	ch := h.Streams[len(h.Streams)-1]
	h.Mu.Unlock()
	ch <- m
}

func (h *Hub) Snapshot() (hellos []*roostv1.Hello, peers []string, statuses []*roostv1.AgentStatus, beats, renewals, enrolls int) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	return append([]*roostv1.Hello(nil), h.Hellos...), append([]string(nil), h.HelloPeers...), append([]*roostv1.AgentStatus(nil), h.Statuses...), h.Heartbeats, h.Renewals, len(h.Enrolls)
}

// eventually polls f every 20 ms for up to 10 s.
func Eventually(t testing.TB, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cleanings returns the cleaning results received so far.
func (h *Hub) Cleanings() []*roostv1.CleaningResult {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	return append([]*roostv1.CleaningResult(nil), h.CleaningResults...)
}
