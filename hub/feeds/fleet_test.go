package feeds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// fleet is a real FSM driven by commands applied directly (no Raft) at a
// fake clock, under this build's apply rules.
type fleet struct {
	t   testing.TB
	f   *state.FSM
	idx uint64
	uid int
	now time.Time
}

func newFleet(t testing.TB, now time.Time) *fleet {
	return &fleet{t: t, f: state.New(state.Options{}), now: now}
}

func (fl *fleet) newUID() string {
	fl.uid++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", fl.uid)
}

// propose applies c at the next index and the fake clock: what a
// controller's Propose does on a leader.
func (fl *fleet) propose(_ context.Context, c *roostv1.Command) error {
	c.Time = timestamppb.New(fl.now)
	c.RulesVersion = state.RulesVersion
	data, err := proto.Marshal(c)
	if err != nil {
		return err
	}
	fl.idx++
	res := fl.f.Apply(&raft.Log{Index: fl.idx, Term: 1, Type: raft.LogCommand, Data: data}).(*state.ApplyResult)
	if res.Err != nil {
		return res.Err
	}
	return nil
}

func (fl *fleet) apply(c *roostv1.Command) {
	fl.t.Helper()
	if err := fl.propose(context.Background(), c); err != nil {
		fl.t.Fatalf("apply %T: %v", c.GetCommand(), err)
	}
}

func (fl *fleet) objects(objs ...resource.Resource) {
	fl.t.Helper()
	c := &roostv1.ApplyObjects{}
	for _, o := range objs {
		c.Objects = append(c.Objects, resource.Wrap(o))
		c.Uids = append(c.Uids, fl.newUID())
	}
	fl.apply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: c}})
}

func hashOf(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// server enrolls Server n, claims it as Machine NAME of pool and has it
// boot a Revision of version, healthy (the Machine is Ready on it).
func (fl *fleet) server(n int, pool, version string) (server, machine string) {
	fl.t.Helper()
	const secret = "abcdef.0123456789abcdef"
	if _, err := fl.f.Get("EnrollmentToken", "abcdef"); err != nil {
		fl.apply(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
			Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hashOf(secret)}},
			Uid:   fl.newUID()}}})
	}
	server = fmt.Sprintf("4c4c4544-0042-3510-8052-%012d", n)
	machine = fmt.Sprintf("%s-%d", pool, n)
	fl.apply(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
		TokenName: "abcdef", SecretSha256: hashOf(secret), Identity: &roostv1.ServerIdentity{SystemUuid: server, PermanentMacs: []string{fmt.Sprintf("52:54:00:00:00:%02x", n)}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Threads: 16, Cores: 8, Sockets: 1}, MemoryBytes: 64 << 30, Firmware: "UEFI", Arch: "amd64"},
		Uid:       fl.newUID()}}})
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: server, Connected: true}}})
	fl.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{
		{Name: machine, Uid: fl.newUID(), Server: server, Pool: pool}}}}})
	fl.boot(server, machine, version)
	return server, machine
}

// boot renders server's next Revision with version and reports it booted
// and healthy.
func (fl *fleet) boot(server, machine, version string) {
	fl.t.Helper()
	n := int64(len(fl.f.Revisions(server)) + 1)
	fl.apply(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
		Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: server, Machine: machine, Number: n, ImageVersion: version,
			Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}},
		Uid: fl.newUID()}}})
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: server, HasBootedRevision: true, BootedRevision: n, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: "True", Reason: "Test"}}}}})
}

// imageRelease is a release of version on channels (unsigned: the FSM
// checks signatures only of imports).
func imageRelease(version string, channels ...string) *roostv1.ImageRelease {
	return &roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: release.Name(version)},
		Spec: &roostv1.ImageReleaseSpec{Version: version, Channels: channels,
			Kernel: &roostv1.Artifact{Sha256: hashOf("k" + version), Size: 1}, Initrd: &roostv1.Artifact{Sha256: hashOf("i" + version), Size: 1}}}
}
