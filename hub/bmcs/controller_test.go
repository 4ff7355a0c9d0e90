package bmcs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/bmc"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const (
	bmcUser     = "roost"
	bmcPassword = "Corr3ct-H0rse-bmc"
	isoDigest   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// harness is a real FSM the controller proposes to.
type harness struct {
	t     *testing.T
	fsm   *state.FSM
	mu    sync.Mutex
	index uint64
	// proposals counts the controller's commands.
	proposals int
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, fsm: state.New(state.Options{})}
}

func (h *harness) apply(c *roostv1.Command) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.Time = timestamppb.New(time.Unix(1_800_000_000+int64(h.index), 0))
	c.RulesVersion = state.RulesBMC
	data, err := proto.Marshal(c)
	if err != nil {
		return err
	}
	h.index++
	if res := h.fsm.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data}).(*state.ApplyResult); res.Err != nil {
		return res.Err
	}
	return nil
}

func (h *harness) must(c *roostv1.Command) {
	h.t.Helper()
	if err := h.apply(c); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) propose(_ context.Context, c *roostv1.Command) error {
	h.mu.Lock()
	h.proposals++
	h.mu.Unlock()
	return h.apply(c)
}

func (h *harness) server(name string) *roostv1.Server {
	return h.fsm.Reader().Get("Server", name).GetServer()
}

func (h *harness) register(name, address string) {
	h.must(&roostv1.Command{Command: &roostv1.Command_RegisterServer{RegisterServer: &roostv1.RegisterServer{
		Name: name, Uid: "00000000-0000-4000-8000-0000000000" + fmt.Sprint(10+len(name)), Macs: []string{"52:54:00:aa:00:01"},
		Bmc: &roostv1.BMC{Address: address, Username: bmcUser, Password: bmcPassword}}}})
}

func (h *harness) request(name string, mod func(*roostv1.ModifyServer)) {
	c := &roostv1.ModifyServer{Name: name, OperationId: fmt.Sprintf("op-%d", h.index)}
	mod(c)
	h.must(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: c}})
}

func condition(s *roostv1.Server, typ string) *roostv1.Condition {
	return state.FindCondition(s.GetStatus().GetConditions(), typ)
}

// fakeRedfish is an httptest Redfish service with one ComputerSystem that
// checks Basic credentials, and can refuse them, fail or hang.
type fakeRedfish struct {
	srv   *httptest.Server
	mu    sync.Mutex
	power string
	fault string // "", "500", "hang"
	hang  chan struct{}
}

func newFakeRedfish(t *testing.T) *fakeRedfish {
	f := &fakeRedfish{power: "Off", hang: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /redfish/v1/Systems/1", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{
			"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "PowerState": f.power, "UUID": "4C4C4544-0042-3510-8052-B4C04F4D4E31",
			"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{"target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"}},
		})
	})
	mux.HandleFunc("POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ ResetType string }
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		switch req.ResetType {
		case "On", "PowerCycle", "ForceRestart":
			f.power = "On"
		case "ForceOff":
			f.power = "Off"
		}
		w.WriteHeader(http.StatusNoContent)
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		fault := f.fault
		f.mu.Unlock()
		switch fault {
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "Base.1.8.InternalError", "message": "The BMC's web server crashed."}})
			return
		case "hang":
			select {
			case <-f.hang:
			case <-r.Context().Done():
			}
			return
		}
		if u, p, ok := r.BasicAuth(); !ok || u != bmcUser || p != bmcPassword {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "Base.1.8.NoValidSession", "message": "There is no valid session established with the implementation."}})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(f.hang); f.srv.Close() })
	return f
}

func (f *fakeRedfish) address() string {
	return "redfish+http://" + strings.TrimPrefix(f.srv.URL, "http://") + "/redfish/v1/Systems/1"
}

func (f *fakeRedfish) setFault(s string) { f.mu.Lock(); f.fault = s; f.mu.Unlock() }

// TestReachabilityReasons: against the real Redfish client, a BMC that
// answers gives BMCReachable=True and the power state; a wrong password,
// a 5xx and no answer each give BMCReachable=False with its reason; and
// the BMC's credentials appear in no condition, log record or read.
func TestReachabilityReasons(t *testing.T) {
	h := newHarness(t)
	f := newFakeRedfish(t)
	h.register("r12u7", f.address())
	var logs bytes.Buffer
	c := &Controller{FSM: h.fsm, Propose: h.propose, Timeout: 300 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx := context.Background()

	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	s := h.server("r12u7")
	if got := condition(s, state.ConditionBMCReachable); got.GetStatus() != "True" || s.GetStatus().GetBmc().GetPowerState() != "Off" {
		t.Fatalf("reachable BMC: condition %v, power %q", got, s.GetStatus().GetBmc().GetPowerState())
	}
	if got := s.GetStatus().GetBmc().GetSystemUuid(); got != "4c4c4544-0042-3510-8052-b4c04f4d4e31" {
		t.Fatalf("system UUID %q", got)
	}
	// Nothing changed: nothing proposed.
	before := h.proposals
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	if h.proposals != before {
		t.Fatalf("an unchanged BMC proposed %d commands", h.proposals-before)
	}

	for _, tc := range []struct {
		name, fault, password, reason string
	}{
		{"wrong password", "", "not-the-password", bmc.ReasonUnauthorized},
		{"5xx", "500", bmcPassword, bmc.ReasonServerError},
		{"timeout", "hang", bmcPassword, bmc.ReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.setFault(tc.fault)
			defer f.setFault("")
			h.must(&roostv1.Command{Command: &roostv1.Command_RegisterServer{RegisterServer: &roostv1.RegisterServer{
				Name: "r12u7", Bmc: &roostv1.BMC{Address: f.address(), Username: bmcUser, Password: tc.password}}}})
			if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
				t.Fatal(err)
			}
			got := condition(h.server("r12u7"), state.ConditionBMCReachable)
			if got.GetStatus() != "False" || got.GetReason() != tc.reason || got.GetMessage() == "" {
				t.Fatalf("BMCReachable = %v, want False %s with a message", got, tc.reason)
			}
			t.Logf("BMCReachable=False %s: %s", got.GetReason(), got.GetMessage())
		})
	}
	// A power request the BMC refuses: BMCOperation=False with the reason,
	// and the request is done with (not retried blindly).
	h.must(&roostv1.Command{Command: &roostv1.Command_RegisterServer{RegisterServer: &roostv1.RegisterServer{
		Name: "r12u7", Bmc: &roostv1.BMC{Address: f.address(), Username: bmcUser, Password: "wrong"}}}})
	h.request("r12u7", func(m *roostv1.ModifyServer) { m.Action, m.Power = roostv1.ServerAction_SERVER_ACTION_POWER, "on" })
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	s = h.server("r12u7")
	if got := condition(s, state.ConditionBMCOperation); got.GetStatus() != "False" || got.GetReason() != bmc.ReasonUnauthorized || s.GetStatus().GetBmc().GetOperation() != nil {
		t.Fatalf("refused power on: %v, pending %v", got, s.GetStatus().GetBmc().GetOperation())
	}

	// With the right password the request goes through.
	h.register("r12u7", f.address())
	h.request("r12u7", func(m *roostv1.ModifyServer) { m.Action, m.Power = roostv1.ServerAction_SERVER_ACTION_POWER, "on" })
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	s = h.server("r12u7")
	if got := condition(s, state.ConditionBMCOperation); got.GetStatus() != "True" || s.GetStatus().GetBmc().GetPowerState() != "On" {
		t.Fatalf("power on: %v, power %q", got, s.GetStatus().GetBmc().GetPowerState())
	}
	if got := condition(s, state.ConditionBMCReachable); got.GetStatus() != "True" {
		t.Fatalf("BMCReachable after recovery: %v", got)
	}

	// The credentials are in no condition, log record or read.
	read, _ := protojson.Marshal(resource.StripWriteOnly(h.fsm.Reader().Get("Server", "r12u7")))
	for what, text := range map[string]string{"logs": logs.String(), "read": string(read)} {
		for _, secret := range []string{bmcPassword, "not-the-password"} {
			if strings.Contains(text, secret) {
				t.Errorf("the BMC password appears in the %s:\n%s", what, text)
			}
		}
	}
	if strings.Contains(string(read), `"`+bmcUser+`"`) {
		t.Errorf("the BMC user name appears in a read: %s", read)
	}
}

// fakeBMC records calls and fails the ones named in fail.
type fakeBMC struct {
	calls []string
	power bmc.PowerState
	fail  map[string]error
}

func (b *fakeBMC) call(name string) error {
	b.calls = append(b.calls, name)
	return b.fail[name]
}
func (b *fakeBMC) PowerState(context.Context) (bmc.PowerState, error) {
	return b.power, b.call("PowerState")
}
func (b *fakeBMC) SetPower(_ context.Context, a bmc.PowerAction) error {
	if err := b.call("SetPower " + string(a)); err != nil {
		return err
	}
	if a == bmc.PowerActionOff {
		b.power = bmc.PowerOff
	} else {
		b.power = bmc.PowerOn
	}
	return nil
}
func (b *fakeBMC) SetBootOnce(_ context.Context, d bmc.BootDevice) error {
	return b.call("SetBootOnce " + string(d))
}
func (b *fakeBMC) InsertMedia(_ context.Context, url string) error {
	return b.call("InsertMedia " + url)
}
func (b *fakeBMC) EjectMedia(context.Context) error { return b.call("EjectMedia") }

// TestProvision: a provision inserts the media under a URL for that
// Server, boots once from CD and powers on; the media is ejected once the
// Server has enrolled; a step that fails ejects the media again and
// records the reason.
func TestProvision(t *testing.T) {
	h := newHarness(t)
	h.register("r12u7", "redfish+http://bmc.test/redfish/v1/Systems/1")
	fb := &fakeBMC{power: bmc.PowerOff, fail: map[string]error{}}
	c := &Controller{FSM: h.fsm, Propose: h.propose,
		Connect: func(*roostv1.BMC) (bmc.BMC, error) { return fb, nil },
		MediaURL: func(server, digest string) (string, error) {
			return "https://hub.test/media/v1/" + server + "/TOKEN/enroll.iso", nil
		}}
	ctx := context.Background()
	provision := func() {
		h.request("r12u7", func(m *roostv1.ModifyServer) {
			m.Action, m.MediaDigest = roostv1.ServerAction_SERVER_ACTION_PROVISION, isoDigest
		})
	}

	// A BMC that fails the boot override: the media goes out again.
	fb.fail["SetBootOnce cd"] = fmt.Errorf("redfish: PATCH: %w", bmc.ErrServer)
	provision()
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	want := "InsertMedia https://hub.test/media/v1/r12u7/TOKEN/enroll.iso,SetBootOnce cd,EjectMedia"
	if got := strings.Join(fb.calls, ","); !strings.HasPrefix(got, want) {
		t.Fatalf("calls %s, want %s first", got, want)
	}
	s := h.server("r12u7")
	if got := condition(s, state.ConditionBMCOperation); got.GetStatus() != "False" || got.GetReason() != bmc.ReasonServerError {
		t.Fatalf("failed provision: %v", got)
	}
	if s.GetStatus().GetBmc().GetMediaDigest() != "" || fb.power != bmc.PowerOff {
		t.Fatalf("failed provision left media %q, power %s", s.GetStatus().GetBmc().GetMediaDigest(), fb.power)
	}

	// It works.
	delete(fb.fail, "SetBootOnce cd")
	fb.calls = nil
	provision()
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	want = "InsertMedia https://hub.test/media/v1/r12u7/TOKEN/enroll.iso,SetBootOnce cd,PowerState,SetPower on,PowerState"
	if got := strings.Join(fb.calls, ","); got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
	s = h.server("r12u7")
	if s.GetStatus().GetBmc().GetMediaDigest() != isoDigest || condition(s, state.ConditionBMCOperation).GetStatus() != "True" || s.GetStatus().GetBmc().GetPowerState() != "On" {
		t.Fatalf("after provision: %v", s.GetStatus())
	}
	// Still Registered: the media stays.
	fb.calls = nil
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fb.calls, ","); got != "PowerState" {
		t.Fatalf("calls before enrollment %s", got)
	}
	// The agent enrolls (matched by MAC): the media is ejected.
	h.must(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: strings.Repeat("0", 64)}},
		Uid:   "00000000-0000-4000-8000-00000000aaaa"}}})
	h.must(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{TokenName: "abcdef", SecretSha256: strings.Repeat("0", 64),
		Identity: &roostv1.ServerIdentity{SystemUuid: "4c4c4544-0042-3510-8052-b4c04f4d4e31", PermanentMacs: []string{"52:54:00:aa:00:01"}}, AgentVersion: "v0", Uid: "00000000-0000-4000-8000-00000000bbbb"}}})
	fb.calls = nil
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fb.calls, ","); got != "EjectMedia,PowerState" {
		t.Fatalf("calls after enrollment %s", got)
	}
	if d := h.server("r12u7").GetStatus().GetBmc().GetMediaDigest(); d != "" {
		t.Fatalf("media %q still recorded after the eject", d)
	}
	// Without virtual media served by the hub, a provision fails clearly.
	c.MediaURL = nil
	provision()
	if _, err := c.Reconcile(ctx, "r12u7"); err != nil {
		t.Fatal(err)
	}
	if got := condition(h.server("r12u7"), state.ConditionBMCOperation); got.GetStatus() != "False" || !strings.Contains(got.GetMessage(), "--media-addr") {
		t.Fatalf("provision without media: %v", got)
	}
	_ = errors.New
}
