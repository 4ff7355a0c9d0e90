package ca

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

var testNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func newTestCA(t *testing.T) *Authority {
	t.Helper()
	c, err := New("Roost test CA", testNow)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	a, err := Load(c)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return a
}

func mustParse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	c, err := tlsconfig.ParseCertificatePEM(certPEM)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

func verify(a *Authority, c *x509.Certificate, at time.Time, usage x509.ExtKeyUsage) error {
	_, err := c.Verify(x509.VerifyOptions{
		Roots:       a.CertPool(),
		CurrentTime: at,
		KeyUsages:   []x509.ExtKeyUsage{usage},
	})
	return err
}

func TestNewCA(t *testing.T) {
	c, err := New("Roost CA", testNow)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c.PrivateKeyPem), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("key is not PKCS#8 PEM:\n%s", c.PrivateKeyPem)
	}
	cert := mustParse(t, c.CertificatePem)
	if !cert.IsCA || cert.Subject.CommonName != "Roost CA" {
		t.Errorf("IsCA=%v CN=%q", cert.IsCA, cert.Subject.CommonName)
	}
	if pk, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pk.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", cert.PublicKey)
	}
	if want := testNow.Add(-time.Hour); !cert.NotBefore.Equal(want) {
		t.Errorf("NotBefore %v, want %v", cert.NotBefore, want)
	}
	if got := cert.NotAfter.Sub(cert.NotBefore); got != CALifetime {
		t.Errorf("validity %v, want %v", got, CALifetime)
	}
	if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v", cert.SerialNumber)
	}
	if _, err := New("", testNow); err == nil {
		t.Error("New with empty name: no error")
	}
}

func TestLoadErrors(t *testing.T) {
	good, err := New("ca", testNow)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New("other", testNow)
	if err != nil {
		t.Fatal(err)
	}
	a := newTestCA(t)
	leafPEM, leafKey, err := a.Issue(Profile{CommonName: "m1", Role: RoleMember, Lifetime: time.Hour}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ca   *roostv1.CertificateAuthority
		want string
	}{
		{"nil", nil, "no CA"},
		{"empty cert", &roostv1.CertificateAuthority{PrivateKeyPem: good.PrivateKeyPem}, "certificate: empty PEM"},
		{"garbage cert", &roostv1.CertificateAuthority{CertificatePem: []byte("nope"), PrivateKeyPem: good.PrivateKeyPem}, "no PEM data"},
		{"key as cert", &roostv1.CertificateAuthority{CertificatePem: good.PrivateKeyPem, PrivateKeyPem: good.PrivateKeyPem}, "no [\"CERTIFICATE\"] PEM block"},
		{"no key", &roostv1.CertificateAuthority{CertificatePem: good.CertificatePem}, "private key: empty PEM"},
		{"mismatched key", &roostv1.CertificateAuthority{CertificatePem: good.CertificatePem, PrivateKeyPem: other.PrivateKeyPem}, "does not match"},
		{"leaf", &roostv1.CertificateAuthority{CertificatePem: leafPEM, PrivateKeyPem: leafKey}, "not a CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.ca)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error %v, want containing %q", err, tc.want)
			}
		})
	}
}

func TestFingerprintStable(t *testing.T) {
	c, err := New("ca", testNow)
	if err != nil {
		t.Fatal(err)
	}
	a1, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	fp := a1.Fingerprint()
	if len(fp) != 64 || strings.ToLower(fp) != fp {
		t.Fatalf("fingerprint %q is not 64 lower-hex chars", fp)
	}
	if fp != a2.Fingerprint() || fp != a1.Fingerprint() {
		t.Error("fingerprint changes across loads")
	}
	if got, err := FingerprintPEM(a1.CertificatePEM()); err != nil || got != fp {
		t.Errorf("FingerprintPEM = %q, %v; want %q", got, err, fp)
	}
	if other := newTestCA(t); other.Fingerprint() == fp {
		t.Error("two CAs share a fingerprint")
	}
}

func TestIssueRolesUsagesSANs(t *testing.T) {
	a := newTestCA(t)
	for _, tc := range []struct {
		p         Profile
		wantUsage []x509.ExtKeyUsage
		wantDNS   []string
	}{
		{
			p:         Profile{CommonName: "hub-1", Role: RoleMember, DNSNames: []string{"hub1.example.com", ServerName}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}, Lifetime: 24 * time.Hour},
			wantUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			wantDNS:   []string{ServerName, "hub1.example.com"},
		},
		{
			p:         Profile{CommonName: "alice", Role: RoleAdmin, Lifetime: 24 * time.Hour},
			wantUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			p:         Profile{CommonName: "server-0042", Role: RoleAgent, Lifetime: time.Hour},
			wantUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
	} {
		t.Run(tc.p.Role, func(t *testing.T) {
			certPEM, keyPEM, err := a.Issue(tc.p, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("key pair: %v", err)
			}
			c := mustParse(t, certPEM)
			if got := tlsconfig.RoleOf(c); got != tc.p.Role {
				t.Errorf("RoleOf = %q, want %q", got, tc.p.Role)
			}
			if c.Subject.CommonName != tc.p.CommonName {
				t.Errorf("CN %q", c.Subject.CommonName)
			}
			if !slices.Equal(c.ExtKeyUsage, tc.wantUsage) {
				t.Errorf("ExtKeyUsage %v, want %v", c.ExtKeyUsage, tc.wantUsage)
			}
			if !slices.Equal(c.DNSNames, tc.wantDNS) {
				t.Errorf("DNSNames %q, want %q", c.DNSNames, tc.wantDNS)
			}
			if len(tc.p.IPAddresses) > 0 && (len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(tc.p.IPAddresses[0])) {
				t.Errorf("IPAddresses %v", c.IPAddresses)
			}
			if c.IsCA {
				t.Error("leaf is a CA")
			}
			if !c.NotAfter.Equal(testNow.Add(tc.p.Lifetime)) || !c.NotBefore.Equal(testNow.Add(-LeafBackdate)) {
				t.Errorf("validity %v..%v", c.NotBefore, c.NotAfter)
			}
			if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
				t.Errorf("serial %v", c.SerialNumber)
			}
			for _, u := range tc.wantUsage {
				if err := verify(a, c, testNow, u); err != nil {
					t.Errorf("verify for usage %v: %v", u, err)
				}
			}
			if tc.p.Role != RoleMember {
				if err := verify(a, c, testNow, x509.ExtKeyUsageServerAuth); err == nil {
					t.Error("non-member certificate verifies for server auth")
				}
			} else if err := c.VerifyHostname(ServerName); err != nil {
				t.Errorf("member cert: %v", err)
			}
			if err := verify(a, c, testNow.Add(tc.p.Lifetime+time.Minute), x509.ExtKeyUsageClientAuth); err == nil {
				t.Error("certificate verifies after expiry")
			}
			if err := verify(newTestCA(t), c, testNow, x509.ExtKeyUsageClientAuth); err == nil {
				t.Error("certificate verifies against another CA")
			}
		})
	}
}

func TestIssueCapsAtCAExpiry(t *testing.T) {
	a := newTestCA(t)
	certPEM, _, err := a.Issue(Profile{CommonName: "x", Role: RoleAgent, Lifetime: 100 * 365 * 24 * time.Hour}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if c := mustParse(t, certPEM); !c.NotAfter.Equal(a.Certificate().NotAfter) {
		t.Errorf("NotAfter %v, want CA's %v", c.NotAfter, a.Certificate().NotAfter)
	}
	_, _, err = a.Issue(Profile{CommonName: "x", Role: RoleAgent, Lifetime: time.Hour}, a.Certificate().NotAfter.Add(time.Second))
	if err == nil || !strings.Contains(err.Error(), "CA certificate expired") {
		t.Errorf("issue after CA expiry: %v", err)
	}
}

func TestProfileErrors(t *testing.T) {
	a := newTestCA(t)
	for _, tc := range []struct {
		p    Profile
		want string
	}{
		{Profile{Role: RoleAdmin, Lifetime: time.Hour}, "empty common name"},
		{Profile{CommonName: "x", Role: "roost:root", Lifetime: time.Hour}, `unknown role "roost:root"`},
		{Profile{CommonName: "x", Role: RoleAdmin}, "lifetime 0s is not positive"},
		{Profile{CommonName: "x", Role: RoleAdmin, Lifetime: time.Hour, DNSNames: []string{""}}, "empty DNS name"},
		{Profile{CommonName: "x", Role: RoleAdmin, Lifetime: time.Hour, IPAddresses: []net.IP{{1, 2, 3}}}, "invalid IP"},
	} {
		if _, _, err := a.Issue(tc.p, testNow); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Issue(%+v) error %v, want %q", tc.p, err, tc.want)
		}
	}
}

func TestSignCSR(t *testing.T) {
	a := newTestCA(t)
	csrPEM, keyPEM, err := NewCSR("whatever-the-agent-says")
	if err != nil {
		t.Fatal(err)
	}
	p := Profile{CommonName: "server-7", Role: RoleAgent, Lifetime: time.Hour}
	certPEM, err := a.SignCSR(csrPEM, p, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("issued certificate does not match the CSR key: %v", err)
	}
	c := mustParse(t, certPEM)
	if c.Subject.CommonName != "server-7" || tlsconfig.RoleOf(c) != RoleAgent {
		t.Errorf("subject %v: the profile, not the CSR, decides", c.Subject)
	}
	if err := verify(a, c, testNow, x509.ExtKeyUsageClientAuth); err != nil {
		t.Error(err)
	}
}

func TestSignCSRIgnoresRequestedSANsAndRole(t *testing.T) {
	a := newTestCA(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "evil", Organization: []string{RoleAdmin}},
		DNSNames: []string{ServerName, "evil.example"},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := a.SignCSR(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		Profile{CommonName: "server-9", Role: RoleAgent, Lifetime: time.Hour}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, certPEM)
	if tlsconfig.RoleOf(c) != RoleAgent || c.Subject.CommonName != "server-9" || len(c.DNSNames) != 0 || len(c.Subject.Organization) != 1 {
		t.Errorf("CSR content leaked into the certificate: %v %q", c.Subject, c.DNSNames)
	}
}

func TestSignCSRRefusesBadInput(t *testing.T) {
	a := newTestCA(t)
	csrPEM, _, err := NewCSR("x")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(csrPEM)
	tampered := slices.Clone(block.Bytes)
	tampered[len(tampered)-1] ^= 0x01 // last byte of the signature
	badSig := pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: tampered})

	caPEM := a.CertificatePEM()
	p := Profile{CommonName: "x", Role: RoleAgent, Lifetime: time.Hour}
	for _, tc := range []struct {
		name string
		csr  []byte
		want string
	}{
		{"bad signature", badSig, "bad CSR signature"},
		{"empty", nil, "empty PEM"},
		{"not PEM", []byte("hello"), "no PEM data"},
		{"certificate instead", caPEM, "no [\"CERTIFICATE REQUEST\" \"NEW CERTIFICATE REQUEST\"] PEM block"},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}}), "sign CSR: parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.SignCSR(tc.csr, p, testNow)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want containing %q", err, tc.want)
			}
		})
	}
	if _, err := a.SignCSR(csrPEM, Profile{CommonName: "x", Role: "nobody", Lifetime: time.Hour}, testNow); err == nil {
		t.Error("bad profile accepted")
	}
}

// pair is a certificate and key issued by a test CA.
type pair struct{ cert, key []byte }

func issue(t *testing.T, a *Authority, cn, role string, now time.Time, life time.Duration) pair {
	t.Helper()
	c, k, err := a.Issue(Profile{CommonName: cn, Role: role, Lifetime: life}, now)
	if err != nil {
		t.Fatal(err)
	}
	return pair{c, k}
}

// handshake runs a real TLS handshake over loopback TCP and returns the
// client's and the server's errors.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, serverCfg)
		err = tc.Handshake()
		if err == nil {
			// In TLS 1.3 the client finishes before the server has checked
			// the client certificate; exchange a byte so the client sees
			// the server's verdict.
			_, err = tc.Write([]byte{1})
		}
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, clientCfg)
	clientErr = tc.Handshake()
	if clientErr == nil {
		_, clientErr = tc.Read(make([]byte, 1))
	}
	if clientErr != nil {
		_ = c.Close() // unblock the server
	}
	serverErr = <-done
	return clientErr, serverErr
}

func TestTLSHandshakes(t *testing.T) {
	a := newTestCA(t)
	now := time.Now()
	member := issue(t, a, "hub-1", RoleMember, now, time.Hour)
	member2 := issue(t, a, "hub-2", RoleMember, now, time.Hour)
	admin := issue(t, a, "alice", RoleAdmin, now, time.Hour)
	agent := issue(t, a, "server-1", RoleAgent, now, time.Hour)
	expiredMember := issue(t, a, "hub-old", RoleMember, now.Add(-48*time.Hour), time.Hour)
	expiredAdmin := issue(t, a, "bob", RoleAdmin, now.Add(-48*time.Hour), time.Hour)
	foreign := issue(t, newTestCA(t), "mallory", RoleAdmin, now, time.Hour)
	foreignMember := issue(t, newTestCA(t), "hub-x", RoleMember, now, time.Hour)
	pool := a.CertPool()

	server := func(p pair) *tls.Config {
		cfg, err := ServerTLS(p.cert, p.key, pool)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	client := func(p pair) *tls.Config {
		cfg, err := tlsconfig.ClientTLS(p.cert, p.key, pool)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	mutual := func(p pair) *tls.Config {
		cfg, err := MutualTLS(p.cert, p.key, pool)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	for _, tc := range []struct {
		name           string
		server, client *tls.Config
		wantOK         bool
		wantErr        string // substring of the client or server error
	}{
		{"api: admin", server(member), client(admin), true, ""},
		{"api: agent", server(member), client(agent), true, ""},
		{"api: member as client", server(member), client(member2), true, ""},
		{"api: anonymous (join)", server(member), client(pair{}), true, ""},
		{"api: expired server cert", server(expiredMember), client(admin), false, "expired"},
		{"api: expired client cert", server(member), client(expiredAdmin), false, "expired"},
		{"api: client cert from another CA", server(member), client(foreign), false, "unknown authority"},
		{"api: server from another CA", server(foreignMember), client(admin), false, "unknown authority"},
		{"api: server is not a member", server(agent), client(admin), false, "roost-hub"},
		{"raft: member to member", mutual(member), mutual(member2), true, ""},
		{"raft: admin dials raft", mutual(member), client(admin), false, `role "roost:admins", want "roost:members"`},
		{"raft: agent dials raft", mutual(member), client(agent), false, `role "roost:agents"`},
		{"raft: anonymous dials raft", mutual(member), client(pair{}), false, "certificate"},
		{"raft: expired member", mutual(member), client(expiredMember), false, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cerr, serr := handshake(t, tc.server, tc.client)
			t.Logf("client: %v; server: %v", cerr, serr)
			if tc.wantOK {
				if cerr != nil || serr != nil {
					t.Fatalf("handshake failed: client %v, server %v", cerr, serr)
				}
				return
			}
			if cerr == nil && serr == nil {
				t.Fatal("handshake succeeded, want refusal")
			}
			if tc.wantErr != "" && !strings.Contains(errString(cerr)+" | "+errString(serr), tc.wantErr) {
				t.Fatalf("errors (client %v, server %v) do not mention %q", cerr, serr, tc.wantErr)
			}
		})
	}
}

func TestMutualTLSRaftDialerRefusesNonMemberServer(t *testing.T) {
	a := newTestCA(t)
	now := time.Now()
	member := issue(t, a, "hub-1", RoleMember, now, time.Hour)
	// A listener that somehow serves an admin certificate (built by hand,
	// since MutualTLS itself refuses one).
	admin := issue(t, a, "alice", RoleAdmin, now, time.Hour)
	cert, err := tls.X509KeyPair(admin.cert, admin.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert}
	cli, err := MutualTLS(member.cert, member.key, a.CertPool())
	if err != nil {
		t.Fatal(err)
	}
	cerr, _ := handshake(t, srv, cli)
	if cerr == nil {
		t.Fatal("raft dialer accepted a non-member server")
	}
}

func TestRequirePeerRole(t *testing.T) {
	a := newTestCA(t)
	admin := mustParse(t, issue(t, a, "alice", RoleAdmin, testNow, time.Hour).cert)
	member := mustParse(t, issue(t, a, "hub-1", RoleMember, testNow, time.Hour).cert)
	check := tlsconfig.RequirePeerRole(RoleMember, "server")
	if err := check(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{admin, a.Certificate()}}}); err == nil {
		t.Error("admin accepted as member")
	}
	if err := check(tls.ConnectionState{}); err == nil {
		t.Error("no chain accepted")
	}
	if err := check(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{member, a.Certificate()}}}); err != nil {
		t.Error(err)
	}
}

func TestMutualTLSRefusesOwnNonMemberCert(t *testing.T) {
	a := newTestCA(t)
	admin := issue(t, a, "alice", RoleAdmin, testNow, time.Hour)
	if _, err := MutualTLS(admin.cert, admin.key, a.CertPool()); err == nil || !strings.Contains(err.Error(), "want \"roost:members\"") {
		t.Fatalf("MutualTLS with admin cert: %v", err)
	}
}

func TestTLSConfigShape(t *testing.T) {
	a := newTestCA(t)
	m := issue(t, a, "hub-1", RoleMember, testNow, time.Hour)
	s, err := ServerTLS(m.cert, m.key, a.CertPool())
	if err != nil {
		t.Fatal(err)
	}
	if s.MinVersion != tls.VersionTLS13 || s.ClientAuth != tls.VerifyClientCertIfGiven || s.ClientCAs == nil {
		t.Errorf("server config %+v", s)
	}
	c, err := tlsconfig.ClientTLS(nil, nil, a.CertPool())
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerName != ServerName || c.MinVersion != tls.VersionTLS13 || len(c.Certificates) != 0 {
		t.Errorf("client config %+v", c)
	}
	if _, err := tlsconfig.ClientTLS(m.cert, nil, a.CertPool()); err == nil {
		t.Error("ClientTLS with a certificate but no key: no error")
	}
	if _, err := ServerTLS(nil, nil, a.CertPool()); err == nil {
		t.Error("ServerTLS without certificate: no error")
	}
	if _, err := ServerTLS(m.cert, m.key, nil); err == nil {
		t.Error("ServerTLS without pool: no error")
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// recorder is a health server that records the caller's role.
type recorder struct {
	healthpb.HealthServer
	got chan [3]string
}

func (r *recorder) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	role, cn, ok := PeerRole(ctx)
	okStr := "false"
	if ok {
		okStr = "true"
	}
	r.got <- [3]string{role, cn, okStr}
	return r.HealthServer.Check(ctx, req)
}

func TestPeerRoleOverGRPC(t *testing.T) {
	a := newTestCA(t)
	now := time.Now()
	member := issue(t, a, "hub-1", RoleMember, now, time.Hour)
	admin := issue(t, a, "alice", RoleAdmin, now, time.Hour)
	agent := issue(t, a, "server-3", RoleAgent, now, time.Hour)

	scfg, err := ServerTLS(member.cert, member.key, a.CertPool())
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(scfg)))
	rec := &recorder{HealthServer: health.NewServer(), got: make(chan [3]string, 1)}
	healthpb.RegisterHealthServer(srv, rec)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	for _, tc := range []struct {
		p    pair
		want [3]string
	}{
		{admin, [3]string{RoleAdmin, "alice", "true"}},
		{agent, [3]string{RoleAgent, "server-3", "true"}},
		{member, [3]string{RoleMember, "hub-1", "true"}},
		{pair{}, [3]string{"", "", "false"}},
	} {
		ccfg, err := tlsconfig.ClientTLS(tc.p.cert, tc.p.key, a.CertPool())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(ccfg)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		conn.Close()
		if err != nil {
			t.Fatalf("%v: Check: %v", tc.want, err)
		}
		if got := <-rec.got; got != tc.want {
			t.Errorf("PeerRole = %q, want %q", got, tc.want)
		}
	}
}

func TestPeerRoleWithoutPeer(t *testing.T) {
	if _, _, ok := PeerRole(context.Background()); ok {
		t.Error("ok without a peer")
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{}})
	if _, _, ok := PeerRole(ctx); ok {
		t.Error("ok without verified chains")
	}
}
