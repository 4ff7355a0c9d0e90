package api

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func validEnrollRequest(t testing.TB) *roostv1.EnrollRequest {
	csr, _, err := ca.NewCSR("x")
	if err != nil {
		t.Fatal(err)
	}
	return &roostv1.EnrollRequest{
		Token: "abcdef.0123456789abcdef", CsrPem: csr, AgentVersion: "v0.1.0",
		Identity: &roostv1.ServerIdentity{SystemUuid: "4C4C4544-0042-3510-8052-B4C04F4D4E31", PermanentMacs: []string{"52:54:00:12:34:56"}},
		Inventory: &roostv1.Inventory{
			Cpu: &roostv1.CPUInfo{Model: "Xeon", Sockets: 2, Cores: 32, Threads: 64}, MemoryBytes: 256 << 30,
			Disks:  []*roostv1.DiskInfo{{Name: "nvme0n1", SizeBytes: 1 << 40, Serial: "S1", Wwn: "eui.1"}},
			Nics:   []*roostv1.NICInfo{{Name: "eno1", Mac: "52:54:00:12:34:56", Driver: "ice", SpeedMbps: 25000, PciAddress: "0000:3b:00.0", LinkUp: true}},
			System: &roostv1.SystemInfo{Vendor: "Dell Inc.", Product: "PowerEdge R650", Serial: "ABC"}, Firmware: "UEFI", Arch: "amd64",
		},
	}
}

func fields(vs []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range vs {
		m[v] = true
	}
	return m
}

func TestValidateEnrollRequest(t *testing.T) {
	if vs := ValidateEnrollRequest(validEnrollRequest(t)); len(vs) != 0 {
		t.Fatalf("valid request: %v", vs)
	}
	for name, tc := range map[string]struct {
		mod  func(*roostv1.EnrollRequest)
		want string
	}{
		"token":       {func(r *roostv1.EnrollRequest) { r.Token = "ABCDEF.0123456789abcdef" }, "token"},
		"csr":         {func(r *roostv1.EnrollRequest) { r.CsrPem = []byte("nope") }, "csrPem"},
		"no csr":      {func(r *roostv1.EnrollRequest) { r.CsrPem = nil }, "csrPem"},
		"uuid":        {func(r *roostv1.EnrollRequest) { r.Identity.SystemUuid = "4c4c4544" }, "identity.systemUuid"},
		"mac":         {func(r *roostv1.EnrollRequest) { r.Identity.PermanentMacs = []string{"52:54:00:12:34:56", "nope"} }, "identity.permanentMacs[1]"},
		"no identity": {func(r *roostv1.EnrollRequest) { r.Identity = &roostv1.ServerIdentity{} }, "identity"},
		"memory":      {func(r *roostv1.EnrollRequest) { r.Inventory.MemoryBytes = -5 }, "inventory.memoryBytes"},
		"cores":       {func(r *roostv1.EnrollRequest) { r.Inventory.Cpu.Cores = -1 }, "inventory.cpu.cores"},
		"disk size":   {func(r *roostv1.EnrollRequest) { r.Inventory.Disks[0].SizeBytes = -1 }, "inventory.disks[0].sizeBytes"},
		"nic mac":     {func(r *roostv1.EnrollRequest) { r.Inventory.Nics[0].Mac = "xx" }, "inventory.nics[0].mac"},
		"nic speed":   {func(r *roostv1.EnrollRequest) { r.Inventory.Nics[0].SpeedMbps = -1 }, "inventory.nics[0].speedMbps"},
		"firmware":    {func(r *roostv1.EnrollRequest) { r.Inventory.Firmware = "coreboot" }, "inventory.firmware"},
		"long string": {func(r *roostv1.EnrollRequest) { r.Inventory.System.Vendor = strings.Repeat("x", 300) }, "inventory.system.vendor"},
		"bad utf8":    {func(r *roostv1.EnrollRequest) { r.AgentVersion = "\xff" }, "agentVersion"},
		"too many disks": {func(r *roostv1.EnrollRequest) {
			r.Inventory.Disks = make([]*roostv1.DiskInfo, MaxDisks+1)
		}, "inventory.disks"},
		"too many nics": {func(r *roostv1.EnrollRequest) {
			r.Inventory.Nics = make([]*roostv1.NICInfo, MaxNICs+1)
		}, "inventory.nics"},
	} {
		t.Run(name, func(t *testing.T) {
			r := validEnrollRequest(t)
			tc.mod(r)
			var got []string
			for _, v := range ValidateEnrollRequest(r) {
				got = append(got, v.Field)
			}
			if !fields(got)[tc.want] {
				t.Errorf("violations %v, want one for %s", got, tc.want)
			}
		})
	}
}

// FuzzEnrollRequestValidation feeds arbitrary bytes as an EnrollRequest:
// validation never panics, and a request it accepts is enrolled by the
// FSM without panicking, under a valid DNS-1123 name with valid labels.
func FuzzEnrollRequestValidation(f *testing.F) {
	valid := validEnrollRequest(f)
	seed, _ := proto.Marshal(valid)
	f.Add(seed)
	for _, mod := range []func(*roostv1.EnrollRequest){
		func(r *roostv1.EnrollRequest) { r.Identity.SystemUuid = "" },
		func(r *roostv1.EnrollRequest) { r.Identity.SystemUuid = "03000200-0400-0500-0006-000700080009" },
		func(r *roostv1.EnrollRequest) {
			r.Inventory.System.Vendor = "ÄÖÜ ---- ..__ " + strings.Repeat("ß", 40)
		},
		func(r *roostv1.EnrollRequest) {
			r.Inventory.Disks = append(r.Inventory.Disks, &roostv1.DiskInfo{SizeBytes: -1})
		},
		func(r *roostv1.EnrollRequest) {
			r.Identity.PermanentMacs = append(r.Identity.PermanentMacs, "00:00:5e:00:53:01:00:00")
		},
	} {
		r := proto.Clone(valid).(*roostv1.EnrollRequest)
		mod(r)
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x1a, 0x02, 0x0a, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &roostv1.EnrollRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		if vs := ValidateEnrollRequest(req); len(vs) > 0 {
			return
		}
		fsm := state.New(state.Options{})
		id, hash, _ := ParseEnrollmentToken(req.GetToken())
		now := timestamppb.Now()
		apply := func(i uint64, c *roostv1.Command) *state.ApplyResult {
			c.Time = now
			b, _ := proto.Marshal(c)
			return fsm.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: b}).(*state.ApplyResult)
		}
		apply(1, &roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
			Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: id}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hash}}, Uid: "u"}}})
		res := apply(2, &roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
			TokenName: id, SecretSha256: hash, Identity: req.GetIdentity(), Inventory: req.GetInventory(), Uid: "u2"}}})
		if res.Err != nil {
			t.Fatalf("valid request refused by the FSM: %v", res.Err)
		}
		name := res.Results[0].GetName()
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			t.Fatalf("server name %q: %v", name, msgs)
		}
		checkServerLabels(t, fsm, name)
	})
}

// checkServerLabels fails t when Server name is missing from fsm or one
// of its labels is not a valid label value.
func checkServerLabels(t *testing.T, fsm *state.FSM, name string) {
	t.Helper()
	o, err := fsm.Get("Server", name)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range o.GetServer().GetMetadata().GetLabels() {
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			t.Fatalf("label %s=%q: %v", k, v, msgs)
		}
	}
}

// FuzzReregisterRequestValidation feeds arbitrary bytes as a
// ReregisterRequest: the validation never panics, and a request it accepts
// re-registers the Server the same identity enrolls as, with valid labels.
func FuzzReregisterRequestValidation(f *testing.F) {
	valid := validEnrollRequest(f)
	seed, _ := proto.Marshal(&roostv1.ReregisterRequest{Identity: valid.GetIdentity(), Inventory: valid.GetInventory(), AgentVersion: "v1"})
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &roostv1.ReregisterRequest{}
		if proto.Unmarshal(data, req) != nil || len(ValidateReregisterRequest(req)) > 0 {
			return
		}
		now := timestamppb.Now()
		apply := func(fsm *state.FSM, i uint64, c *roostv1.Command) *state.ApplyResult {
			c.Time, c.RulesVersion = now, state.RulesVersion
			b, _ := proto.Marshal(c)
			return fsm.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: b}).(*state.ApplyResult)
		}
		// The name the identity enrolls as, from a token enrollment.
		enrolled := state.New(state.Options{})
		apply(enrolled, 1, &roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
			Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: strings.Repeat("a", 64)}}, Uid: "u"}}})
		res := apply(enrolled, 2, &roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
			TokenName: "abcdef", SecretSha256: strings.Repeat("a", 64), Identity: req.GetIdentity(), Inventory: req.GetInventory(), Uid: "u2"}}})
		if res.Err != nil {
			t.Fatalf("enrolling the identity: %v", res.Err)
		}
		name := res.Results[0].GetName()
		fsm := state.New(state.Options{})
		res = apply(fsm, 1, &roostv1.Command{Command: &roostv1.Command_ReregisterServer{ReregisterServer: &roostv1.ReregisterServer{
			Name: name, Identity: req.GetIdentity(), Inventory: req.GetInventory(), AgentVersion: req.GetAgentVersion(), Uid: "u3"}}})
		if res.Err != nil {
			t.Fatalf("valid re-registration refused by the FSM: %v", res.Err)
		}
		checkServerLabels(t, fsm, name)
	})
}

// FuzzAgentStatusValidation feeds arbitrary bytes as an AgentStatus: the
// validation never panics, and a status it accepts is recorded by the FSM
// without error, with valid derived labels.
func FuzzAgentStatusValidation(f *testing.F) {
	valid := &roostv1.AgentStatus{Inventory: validEnrollRequest(f).GetInventory(), BootedRevision: 2, AppliedGeneration: 1,
		Conditions: []*roostv1.Condition{{Type: "NetworkReady", Status: "True", Reason: "Applied"}}}
	seed, _ := proto.Marshal(valid)
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		st := &roostv1.AgentStatus{}
		if proto.Unmarshal(data, st) != nil || len(ValidateAgentStatus(st)) > 0 {
			return
		}
		fsm := state.New(state.Options{})
		now := timestamppb.Now()
		apply := func(i uint64, c *roostv1.Command) *state.ApplyResult {
			c.Time = now
			b, _ := proto.Marshal(c)
			return fsm.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: b}).(*state.ApplyResult)
		}
		_, hash, _ := ParseEnrollmentToken("abcdef.0123456789abcdef")
		apply(1, &roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
			Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hash}}, Uid: "u"}}})
		res := apply(2, &roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
			TokenName: "abcdef", SecretSha256: hash, Identity: &roostv1.ServerIdentity{PermanentMacs: []string{"52:54:00:00:00:01"}}, Uid: "u2"}}})
		name := res.Results[0].GetName()
		res = apply(3, &roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
			Name: name, Inventory: st.GetInventory(), HasBootedRevision: true, BootedRevision: st.GetBootedRevision(),
			HasConditions: true, Conditions: st.GetConditions()}}})
		if res.Err != nil {
			t.Fatalf("valid status refused: %v", res.Err)
		}
		o, _ := fsm.Get("Server", name)
		for k, v := range o.GetServer().GetMetadata().GetLabels() {
			if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				t.Fatalf("label %s=%q: %v", k, v, msgs)
			}
		}
	})
}
