package redfish_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roostfleet/roost/bmc"
	"github.com/roostfleet/roost/bmc/redfish"
	"github.com/roostfleet/roost/bmc/redfish/redfishtest"
)

const (
	testUser     = "admin"
	testPassword = "s3cret-Pa55word"
)

// emulator starts a BMC emulator over a QEMU that boots nothing (-S).
func emulator(t *testing.T, cfg redfishtest.Config) (*redfishtest.Server, *redfishtest.QEMU) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	q, err := redfishtest.NewQEMU(redfishtest.QEMUConfig{Args: []string{"-S", "-m", "32"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	cfg.Machine, cfg.Username, cfg.Password = q, testUser, testPassword
	srv, err := redfishtest.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, q
}

func client(t *testing.T, srv *redfishtest.Server, opts redfish.Options) *redfish.Client {
	t.Helper()
	addr, err := redfish.ParseAddress(srv.Address())
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == (redfish.Credentials{}) {
		opts.Credentials = redfish.Credentials{Username: testUser, Password: testPassword}
	}
	if opts.RootCAs == nil && !opts.Insecure {
		opts.RootCAs = srv.CertPool()
	}
	c, err := redfish.New(addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// mediaServer serves fake ISO images over HTTP.
func mediaServer(t *testing.T) *httptest.Server {
	t.Helper()
	img := bytes.Repeat([]byte{0}, 2048*16)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".iso") {
			http.NotFound(w, r)
			return
		}
		w.Write(img)
	}))
	t.Cleanup(s.Close)
	return s
}

func wantPower(t *testing.T, c bmc.BMC, want bmc.PowerState) {
	t.Helper()
	got, err := c.PowerState(context.Background())
	if err != nil {
		t.Fatalf("PowerState: %v", err)
	}
	if got != want {
		t.Fatalf("PowerState = %s, want %s", got, want)
	}
}

func TestClientDrivesQEMU(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			srv, q := emulator(t, redfishtest.Config{RequireIfMatch: true})
			c := client(t, srv, redfish.Options{Sessions: sessions})
			media := mediaServer(t)
			ctx := context.Background()

			wantPower(t, c, bmc.PowerOff)
			if err := c.SetBootOnce(ctx, bmc.BootCD); err != nil {
				t.Fatalf("SetBootOnce: %v", err)
			}
			if target, enabled := srv.BootOverride(); target != "Cd" || enabled != "Once" {
				t.Errorf("boot override = %s/%s, want Cd/Once", target, enabled)
			}
			if err := c.InsertMedia(ctx, media.URL+"/enroll.iso"); err != nil {
				t.Fatalf("InsertMedia: %v", err)
			}
			if err := c.SetPower(ctx, bmc.PowerActionOn); err != nil {
				t.Fatalf("SetPower on: %v", err)
			}
			wantPower(t, c, bmc.PowerOn)
			cmd := q.Cmdline()
			if i := slices.Index(cmd, "-boot"); i < 0 || cmd[i+1] != "once=d" {
				t.Errorf("QEMU command line %q lacks -boot once=d", cmd)
			}
			// The override is used up by the boot.
			if target, enabled := srv.BootOverride(); target != "None" || enabled != "Disabled" {
				t.Errorf("boot override after power on = %s/%s, want None/Disabled", target, enabled)
			}
			first, err := q.CDMedia()
			if err != nil || first == "" {
				t.Fatalf("QEMU's CD = %q, %v; want the inserted image", first, err)
			}
			vms, err := c.VirtualMedia(ctx)
			if err != nil || len(vms) != 1 || !vms[0].Inserted || vms[0].Image != media.URL+"/enroll.iso" || !vms[0].WriteProtected {
				t.Errorf("VirtualMedia = %+v, %v", vms, err)
			}

			// Powering on what is on does nothing.
			if err := c.SetPower(ctx, bmc.PowerActionOn); err != nil {
				t.Fatalf("SetPower on again: %v", err)
			}
			// Media changes on a running server go through QMP.
			if err := c.InsertMedia(ctx, media.URL+"/other.iso"); err != nil {
				t.Fatalf("InsertMedia over inserted media: %v", err)
			}
			second, err := q.CDMedia()
			if err != nil || second == "" || second == first {
				t.Errorf("QEMU's CD after a second insert = %q, %v; want a new image (first %s)", second, err, first)
			}
			if err := c.EjectMedia(ctx); err != nil {
				t.Fatalf("EjectMedia: %v", err)
			}
			if got, err := q.CDMedia(); err != nil || got != "" {
				t.Errorf("QEMU's CD after eject = %q, %v; want empty", got, err)
			}
			if err := c.EjectMedia(ctx); err != nil {
				t.Fatalf("EjectMedia of an empty drive: %v", err)
			}

			// A cycle with a PXE override restarts QEMU with it.
			if err := c.SetBootOnce(ctx, bmc.BootPXE); err != nil {
				t.Fatalf("SetBootOnce: %v", err)
			}
			if err := c.SetPower(ctx, bmc.PowerActionCycle); err != nil {
				t.Fatalf("SetPower cycle: %v", err)
			}
			wantPower(t, c, bmc.PowerOn)
			if cmd := q.Cmdline(); !slices.Contains(cmd, "once=n") {
				t.Errorf("QEMU command line after cycle %q lacks -boot once=n", cmd)
			}
			if err := c.SetPower(ctx, bmc.PowerActionOff); err != nil {
				t.Fatalf("SetPower off: %v", err)
			}
			wantPower(t, c, bmc.PowerOff)
			if q.Running() {
				t.Error("QEMU runs after power off")
			}
			if err := c.SetPower(ctx, bmc.PowerActionOff); err != nil {
				t.Fatalf("SetPower off again: %v", err)
			}

			var patches int
			for _, r := range srv.Requests() {
				if sessions && r.Path != "/redfish/v1" && r.Path != redfishtest.SessionsPath && r.Auth != "session" {
					t.Errorf("%s %s authenticated with %q, want a session", r.Method, r.Path, r.Auth)
				}
				if r.Method == http.MethodPatch {
					patches++
					if r.IfMatch == "" {
						t.Errorf("PATCH %s without If-Match", r.Path)
					}
				}
			}
			if patches != 2 {
				t.Errorf("%d PATCHes, want 2", patches)
			}
			if sessions {
				if n := srv.Sessions(); n != 1 {
					t.Errorf("%d sessions open, want 1", n)
				}
				if err := c.Close(ctx); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if n := srv.Sessions(); n != 0 {
					t.Errorf("%d sessions open after Close, want 0", n)
				}
			}
		})
	}
}

func TestSessionExpiry(t *testing.T) {
	srv, _ := emulator(t, redfishtest.Config{})
	c := client(t, srv, redfish.Options{Sessions: true})
	wantPower(t, c, bmc.PowerOff)
	srv.ExpireSessions()
	wantPower(t, c, bmc.PowerOff) // logs in again
	if n := srv.Sessions(); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// hookTransport calls before once, before the first request matching it.
type hookTransport struct {
	match  func(*http.Request) bool
	before func()
	once   sync.Once
	next   http.RoundTripper
}

func (h *hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.match(r) {
		h.once.Do(h.before)
	}
	return h.next.RoundTrip(r)
}

func TestBootOverrideRetriesOnStaleETag(t *testing.T) {
	srv, _ := emulator(t, redfishtest.Config{RequireIfMatch: true})
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig.RootCAs = srv.CertPool()
	c := client(t, srv, redfish.Options{Transport: &hookTransport{
		match:  func(r *http.Request) bool { return r.Method == http.MethodPatch },
		before: func() { srv.SetBootOverride("Hdd", "Continuous") }, // another user, between GET and PATCH
		next:   base,
	}})
	if err := c.SetBootOnce(context.Background(), bmc.BootHTTP); err != nil {
		t.Fatalf("SetBootOnce: %v", err)
	}
	if target, enabled := srv.BootOverride(); target != "UefiHttp" || enabled != "Once" {
		t.Errorf("boot override = %s/%s, want UefiHttp/Once", target, enabled)
	}
	var patches []string
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPatch {
			patches = append(patches, r.IfMatch)
		}
	}
	if len(patches) != 2 || patches[0] == patches[1] {
		t.Errorf("PATCH If-Match values %q: want a refused one, then a fresh one", patches)
	}
}

func TestUnsupportedValues(t *testing.T) {
	srv, _ := emulator(t, redfishtest.Config{})
	c := client(t, srv, redfish.Options{})
	ctx := context.Background()
	if err := c.SetBootOverride(ctx, "Floppy", redfish.BootOverrideOnce); bmc.Reason(err) != bmc.ReasonUnsupported {
		t.Errorf("boot override to Floppy: %v (reason %s), want Unsupported", err, bmc.Reason(err))
	}
	if err := c.Reset(ctx, redfish.ResetNmi); bmc.Reason(err) != bmc.ReasonUnsupported {
		t.Errorf("Reset Nmi: %v (reason %s), want Unsupported", err, bmc.Reason(err))
	}
	if err := c.InsertMedia(ctx, "ftp://media/x.iso"); err == nil {
		t.Error("InsertMedia of an ftp URL: no error")
	}
	for _, r := range srv.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("%s %s sent for an unsupported value", r.Method, r.Path)
		}
	}
}

// TestErrors checks that a refusing, failing, hanging or untrusted BMC
// gives a clear reason and never shows the credentials, in errors or logs.
func TestErrors(t *testing.T) {
	closedAddr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}()
	for _, tc := range []struct {
		name       string
		fault      redfishtest.Fault
		opts       redfish.Options
		noRootCAs  bool
		address    string
		wantReason string
		wantText   string
	}{
		{name: "wrong password", opts: redfish.Options{Credentials: redfish.Credentials{Username: testUser, Password: "wrong-" + testPassword}}, wantReason: bmc.ReasonUnauthorized, wantText: "HTTP 401"},
		{name: "wrong password, session", opts: redfish.Options{Sessions: true, Credentials: redfish.Credentials{Username: testUser, Password: "wrong-" + testPassword}}, wantReason: bmc.ReasonUnauthorized, wantText: "HTTP 401"},
		{name: "account refused", fault: redfishtest.FaultUnauthorized, wantReason: bmc.ReasonUnauthorized, wantText: "no valid session"},
		{name: "500", fault: redfishtest.FaultServerError, wantReason: bmc.ReasonServerError, wantText: "HTTP 500): The request failed due to an internal service error"},
		{name: "500, session", fault: redfishtest.FaultServerError, opts: redfish.Options{Sessions: true}, wantReason: bmc.ReasonServerError, wantText: "HTTP 500"},
		{name: "hang", fault: redfishtest.FaultHang, opts: redfish.Options{Timeout: 300 * time.Millisecond}, wantReason: bmc.ReasonTimeout, wantText: "timed out"},
		{name: "untrusted certificate", noRootCAs: true, wantReason: bmc.ReasonCertificate, wantText: "set insecure"},
		{name: "refused connection", address: "redfish+https://" + closedAddr + "/redfish/v1/Systems/1", wantReason: bmc.ReasonUnreachable, wantText: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, q := emulator(t, redfishtest.Config{})
			srv.SetFault(tc.fault)
			var logs bytes.Buffer
			opts := tc.opts
			opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			if opts.Credentials == (redfish.Credentials{}) {
				opts.Credentials = redfish.Credentials{Username: testUser, Password: testPassword}
			}
			if !tc.noRootCAs {
				opts.RootCAs = srv.CertPool()
			}
			address := srv.Address()
			if tc.address != "" {
				address = tc.address
			}
			addr, err := redfish.ParseAddress(address)
			if err != nil {
				t.Fatal(err)
			}
			c, err := redfish.New(addr, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			errs := []error{}
			_, err = c.PowerState(ctx)
			errs = append(errs, err)
			errs = append(errs, c.SetPower(ctx, bmc.PowerActionOn))
			errs = append(errs, c.SetBootOnce(ctx, bmc.BootCD))
			errs = append(errs, c.InsertMedia(ctx, "http://media.example/x.iso"))
			errs = append(errs, c.EjectMedia(ctx))
			t.Logf("PowerState: %v", errs[0])
			for _, err := range errs {
				if err == nil {
					t.Fatal("no error")
				}
				if got := bmc.Reason(err); got != tc.wantReason {
					t.Errorf("reason %s, want %s (error: %v)", got, tc.wantReason, err)
				}
				if !strings.Contains(err.Error(), tc.wantText) {
					t.Errorf("error %q does not say %q", err, tc.wantText)
				}
				for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
					if strings.Contains(s, testPassword) {
						t.Errorf("error shows the password: %s", s)
					}
				}
			}
			if !strings.Contains(logs.String(), "redfish request") {
				t.Errorf("no request logged: %q", logs.String())
			}
			if strings.Contains(logs.String(), testPassword) {
				t.Errorf("log shows the password:\n%s", logs.String())
			}
			// Nothing half-done: the machine is as it was.
			if q.Running() || q.Media() != "" {
				t.Errorf("machine changed: running %v, media %q", q.Running(), q.Media())
			}
			if target, enabled := srv.BootOverride(); target != "None" || enabled != "Disabled" {
				t.Errorf("boot override changed to %s/%s", target, enabled)
			}
		})
	}
}

func TestInsecure(t *testing.T) {
	srv, _ := emulator(t, redfishtest.Config{})
	c := client(t, srv, redfish.Options{Insecure: true})
	wantPower(t, c, bmc.PowerOff)
}
