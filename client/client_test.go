package client

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/hub/ca"
)

type fixture struct {
	auth               *ca.Authority
	memberCert, memKey []byte
	adminCert, admKey  []byte
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	now := time.Now()
	c, err := ca.New("Roost test CA", now)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Load(c)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{auth: a}
	f.memberCert, f.memKey, err = a.Issue(ca.Profile{CommonName: "hub-1", Role: ca.RoleMember, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	f.adminCert, f.admKey, err = a.Issue(ca.Profile{CommonName: "alice", Role: ca.RoleAdmin, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) config(hubs ...string) *Config {
	return &Config{
		APIVersion:           APIVersion,
		Kind:                 Kind,
		Hubs:                 hubs,
		CertificateAuthority: string(f.auth.CertificatePEM()),
		ClientCertificate:    string(f.adminCert),
		ClientKey:            string(f.admKey),
	}
}

func TestConfigRoundTrip(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "config") // parent created by Write
	want := f.config("10.0.0.1:7443", "hub-2.example.com:7443", "[fd00::3]:7443")
	if err := want.Write(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", st.Mode().Perm())
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	data, _ := os.ReadFile(path)
	for _, s := range []string{"apiVersion: roost.io/v1", "kind: Config", "hubs:", "certificateAuthority: |", "clientCertificate: |", "clientKey: |"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("file lacks %q:\n%s", s, data)
		}
	}
	// Overwrite in place; no temporary files left behind.
	want.Hubs = want.Hubs[:1]
	if err := want.Write(path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want 1", len(entries))
	}
	if got, err := LoadConfig(path); err != nil || len(got.Hubs) != 1 {
		t.Errorf("after overwrite: %+v, %v", got, err)
	}
}

func TestWriteFillsHeader(t *testing.T) {
	f := newFixture(t)
	c := f.config("h:1")
	c.APIVersion, c.Kind = "", ""
	path := filepath.Join(t.TempDir(), "config")
	if err := c.Write(path); err != nil {
		t.Fatal(err)
	}
	if c.APIVersion != "" {
		t.Error("Write modified the receiver")
	}
	if got, err := LoadConfig(path); err != nil || got.APIVersion != APIVersion || got.Kind != Kind {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestWriteRefusesInvalid(t *testing.T) {
	f := newFixture(t)
	c := f.config()
	path := filepath.Join(t.TempDir(), "config")
	if err := c.Write(path); err == nil || !strings.Contains(err.Error(), "hubs: missing") {
		t.Fatalf("Write without hubs: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("invalid config was written")
	}
}

func TestLoadConfigErrors(t *testing.T) {
	f := newFixture(t)
	good := f.config("10.0.0.1:7443")
	other := newFixture(t)
	indent := func(s string) string { return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ") }
	doc := func(mod func(m map[string]string)) string {
		m := map[string]string{
			"apiVersion":           "apiVersion: roost.io/v1",
			"kind":                 "kind: Config",
			"hubs":                 "hubs:\n- 10.0.0.1:7443",
			"certificateAuthority": "certificateAuthority: |\n" + indent(good.CertificateAuthority),
			"clientCertificate":    "clientCertificate: |\n" + indent(good.ClientCertificate),
			"clientKey":            "clientKey: |\n" + indent(good.ClientKey),
		}
		mod(m)
		var b strings.Builder
		for _, k := range []string{"apiVersion", "kind", "hubs", "certificateAuthority", "clientCertificate", "clientKey", "extra"} {
			if v, ok := m[k]; ok && v != "" {
				b.WriteString(v + "\n")
			}
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"valid", doc(func(map[string]string) {}), ""},
		{"anonymous", doc(func(m map[string]string) { m["clientCertificate"], m["clientKey"] = "", "" }), ""},
		{"wrong kind", doc(func(m map[string]string) { m["kind"] = "kind: Pool" }), `kind: got "Pool", want "Config"`},
		{"wrong apiVersion", doc(func(m map[string]string) { m["apiVersion"] = "apiVersion: v2" }), `apiVersion: got "v2"`},
		{"missing hubs", doc(func(m map[string]string) { m["hubs"] = "" }), "hubs: missing"},
		{"bad hub", doc(func(m map[string]string) { m["hubs"] = "hubs:\n- 10.0.0.1:7443\n- nohost" }), "hubs[1]: address \"nohost\" is not host:port"},
		{"bad port", doc(func(m map[string]string) { m["hubs"] = "hubs:\n- h:99999" }), "hubs[0]: address \"h:99999\" has an invalid port"},
		{"duplicate hub", doc(func(m map[string]string) { m["hubs"] = "hubs:\n- h:1\n- h:1" }), "hubs[1]: duplicate"},
		{"missing CA", doc(func(m map[string]string) { m["certificateAuthority"] = "" }), "certificateAuthority: missing"},
		{"bad CA PEM", doc(func(m map[string]string) { m["certificateAuthority"] = "certificateAuthority: not a pem" }), "certificateAuthority: no PEM certificate"},
		{"bad client cert PEM", doc(func(m map[string]string) { m["clientCertificate"] = "clientCertificate: garbage" }), "clientCertificate: no PEM data"},
		{"missing key", doc(func(m map[string]string) { m["clientKey"] = "" }), "clientKey: missing"},
		{"missing cert", doc(func(m map[string]string) { m["clientCertificate"] = "" }), "clientCertificate: missing"},
		{"mismatched key", doc(func(m map[string]string) { m["clientKey"] = "clientKey: |\n" + indent(string(other.admKey)) }), "clientKey: does not match"},
		{"unknown field", doc(func(m map[string]string) { m["extra"] = "hub: 10.0.0.1:1" }), `unknown field "hub"`},
		{"not yaml", "::: [", "roost config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "admin.conf")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("LoadConfig: %v\n%s", err, tc.body)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing file: %v", err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv(EnvConfig, "/etc/roost/admin.conf")
	if got := DefaultPath(); got != "/etc/roost/admin.conf" {
		t.Errorf("with $ROOST_CONFIG: %q", got)
	}
	t.Setenv(EnvConfig, "")
	t.Setenv("HOME", "/home/alice")
	if got := DefaultPath(); got != "/home/alice/.roost/config" {
		t.Errorf("default: %q", got)
	}
}

// serveHealth starts a TLS gRPC server with the standard health service and
// returns its address.
func serveHealth(t *testing.T, f *fixture) string {
	t.Helper()
	addr, _ := serveHealthServer(t, f)
	return addr
}

func serveHealthServer(t *testing.T, f *fixture) (string, *grpc.Server) {
	t.Helper()
	tlsCfg, err := ca.ServerTLS(f.memberCert, f.memKey, f.auth.CertPool())
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), srv
}

// deadAddress returns a loopback address nobody listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDialSkipsDeadMember(t *testing.T) {
	f := newFixture(t)
	live := serveHealth(t, f)
	dead := deadAddress(t)
	for _, order := range [][]string{{dead, live}, {live, dead}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			cfg := f.config(order...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			conn, err := Dial(ctx, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			hc := healthpb.NewHealthClient(conn)
			for i := range 10 {
				resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("status %v", resp.GetStatus())
				}
			}
		})
	}
}

func TestDialFailsOverWhenMemberStops(t *testing.T) {
	f := newFixture(t)
	a, srvA := serveHealthServer(t, f)
	b := serveHealth(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := Dial(ctx, f.config(a, b), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for i := range 4 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("before stop, call %d: %v", i, err)
		}
	}
	srvA.Stop()
	for i := range 20 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("after stop, call %d: %v", i, err)
		}
	}
}

func TestDialHubsOverride(t *testing.T) {
	f := newFixture(t)
	live := serveHealth(t, f)
	cfg := f.config(deadAddress(t)) // only a dead member in the file
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := Dial(ctx, cfg, []string{live})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestDialAnonymous(t *testing.T) {
	f := newFixture(t)
	live := serveHealth(t, f)
	cfg := f.config(live)
	cfg.ClientCertificate, cfg.ClientKey = "", ""
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := Dial(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestDialAllDeadIsUnavailable(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(deadAddress(t), deadAddress(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := Dial(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("error %v, want Unavailable", err)
	}
	if ctx.Err() != nil {
		t.Fatal("call waited for the deadline instead of failing fast")
	}
}

func TestDialRefusesForeignHub(t *testing.T) {
	f := newFixture(t)
	live := serveHealth(t, newFixture(t)) // a hub of another CA
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := Dial(ctx, f.config(live), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("call to a foreign hub: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Dial(ctx, nil, nil); err == nil {
		t.Error("nil config")
	}
	if _, err := Dial(ctx, f.config(), nil); err == nil || !strings.Contains(err.Error(), "no hub addresses") {
		t.Errorf("no hubs: %v", err)
	}
	if _, err := Dial(ctx, f.config(), []string{"bad"}); err == nil || !strings.Contains(err.Error(), "hubs[0]") {
		t.Errorf("bad hub: %v", err)
	}
	bad := f.config("h:1")
	bad.CertificateAuthority = ""
	if _, err := Dial(ctx, bad, nil); err == nil || !strings.Contains(err.Error(), "certificateAuthority") {
		t.Errorf("no CA: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Dial(cctx, f.config("h:1"), nil); err == nil {
		t.Error("cancelled context")
	}
}

// electingHealth answers Check with UNAVAILABLE, as a hub electing a
// leader does, until its election ends.
type electingHealth struct {
	healthpb.UnimplementedHealthServer
	until time.Time
	calls atomic.Int32
}

func (e *electingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	e.calls.Add(1)
	if time.Now().Before(e.until) {
		return nil, status.Error(codes.Unavailable, "no hub leader elected yet; retry")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// A unary call with a deadline outlasts an election longer than gRPC's
// own retries; without a deadline it fails after those.
func TestDialRetriesUnavailableUntilDeadline(t *testing.T) {
	f := newFixture(t)
	tlsCfg, err := ca.ServerTLS(f.memberCert, f.memKey, f.auth.CertPool())
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	e := &electingHealth{}
	healthpb.RegisterHealthServer(srv, e)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := Dial(context.Background(), f.config(ln.Addr().String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)

	e.until = time.Now().Add(4 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("call through a 4 s election with a 20 s deadline: %v", err)
	}
	t.Logf("answered after %v and %d attempts", time.Since(start).Round(time.Millisecond), e.calls.Load())

	e.until = time.Now().Add(time.Hour)
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("call without a deadline during an election: %v, want UNAVAILABLE", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("call with a deadline within the election: %v, want UNAVAILABLE (the hub's error, before the deadline)", err)
	}
}
