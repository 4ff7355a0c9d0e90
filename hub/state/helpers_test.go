package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// t0 is the time of the first command a harness applies; each later
// command is one second later.
var t0 = time.Date(2026, 11, 3, 2, 0, 0, 0, time.UTC)

// harness applies commands to one FSM with consecutive Raft indexes.
type harness struct {
	tb  testing.TB
	f   *FSM
	idx uint64
	uid int
	// rules, when set, is the rules version of commands that give none.
	rules uint32
}

func newHarness(tb testing.TB, opts Options) *harness {
	return &harness{tb: tb, f: New(opts)}
}

// timeAt is the time a harness stamps on the command at index idx.
func timeAt(idx uint64) time.Time { return t0.Add(time.Duration(idx) * time.Second) }

// apply encodes cmd (stamping Command.time when unset) and applies it at
// the next index.
func (h *harness) apply(cmd *roostv1.Command) *ApplyResult {
	h.tb.Helper()
	if cmd.Time == nil {
		cmd.Time = timestamppb.New(timeAt(h.idx + 1))
	}
	if cmd.RulesVersion == 0 {
		cmd.RulesVersion = h.rules
	}
	return h.applyRaw(mustMarshal(h.tb, cmd))
}

// applyRaw applies data as a LogCommand at the next index.
func (h *harness) applyRaw(data []byte) *ApplyResult {
	h.tb.Helper()
	h.idx++
	res, ok := h.f.Apply(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogCommand, Data: data}).(*ApplyResult)
	if !ok || res == nil {
		h.tb.Fatalf("Apply returned %T, want *ApplyResult", res)
	}
	if res.Index != h.idx {
		h.tb.Fatalf("ApplyResult.Index = %d, want %d", res.Index, h.idx)
	}
	return res
}

// mustApply applies cmd and fails the test on an error result.
func (h *harness) mustApply(cmd *roostv1.Command) *ApplyResult {
	h.tb.Helper()
	res := h.apply(cmd)
	if res.Err != nil {
		h.tb.Fatalf("apply at index %d: %v", res.Index, res.Err)
	}
	return res
}

// objects builds an ApplyObjects command with fresh, predictable UIDs.
func (h *harness) objects(objs ...*roostv1.Object) *roostv1.Command {
	c := &roostv1.ApplyObjects{Objects: objs}
	for range objs {
		h.uid++
		c.Uids = append(c.Uids, fmt.Sprintf("00000000-0000-4000-8000-%012d", h.uid))
	}
	return &roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: c}}
}

func mustMarshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func deleteCmd(kind, name string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_DeleteObject{DeleteObject: &roostv1.DeleteObject{Kind: kind, Name: name}}}
}

func initCACmd(cert, key string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_InitCa{InitCa: &roostv1.InitCA{Ca: &roostv1.CertificateAuthority{
		CertificatePem: []byte(cert), PrivateKeyPem: []byte(key)}}}}
}

func putMemberCmd(id, raftAddr, apiAddr string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_PutMember{PutMember: &roostv1.PutMember{Member: &roostv1.HubMember{
		Id: id, RaftAddress: raftAddr, ApiAddress: apiAddr}}}}
}

func deleteMemberCmd(id string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_DeleteMember{DeleteMember: &roostv1.DeleteMember{Id: id}}}
}

func putTokenCmd(id, secretHash string, expires time.Time, maxUses int32) *roostv1.Command {
	t := &roostv1.JoinToken{Id: id, SecretSha256: secretHash, MaxUses: maxUses}
	if !expires.IsZero() {
		t.ExpiresAt = timestamppb.New(expires)
	}
	return &roostv1.Command{Command: &roostv1.Command_PutJoinToken{PutJoinToken: &roostv1.PutJoinToken{Token: t}}}
}

func useTokenCmd(id, secretHash string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_UseJoinToken{UseJoinToken: &roostv1.UseJoinToken{Id: id, SecretSha256: secretHash}}}
}

// ---- objects

func meta(name string, labels map[string]string) *roostv1.ObjectMeta {
	return &roostv1.ObjectMeta{Name: name, Labels: labels}
}

func clusterObj(name string, labels map[string]string) *roostv1.Object {
	return resource.Wrap(&roostv1.Cluster{Metadata: meta(name, labels), Spec: &roostv1.ClusterSpec{
		ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.4"}})
}

func machineClassObj(name string) *roostv1.Object {
	return resource.Wrap(&roostv1.MachineClass{Metadata: meta(name, nil), Spec: &roostv1.MachineClassSpec{
		ServerSelector: []string{"roost.io/cpus>=16"}}})
}

func networkProfileObj(name string) *roostv1.Object {
	return resource.Wrap(&roostv1.NetworkProfile{Metadata: meta(name, nil), Spec: &roostv1.NetworkProfileSpec{
		Links: []*roostv1.Link{{Name: "eth0", Match: &roostv1.LinkMatch{Name: "en*"}, Dhcp4: true}}}})
}

func windowObj(name string) *roostv1.Object {
	return resource.Wrap(&roostv1.MaintenanceWindow{Metadata: meta(name, nil), Spec: &roostv1.MaintenanceWindowSpec{
		Rrule: "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2", Duration: durationpb.New(4 * time.Hour), TimeZone: "Europe/Berlin"}})
}

// poolObj builds a Pool of cluster using MachineClass "standard"; mods
// change its spec.
func poolObj(name, cluster string, mods ...func(*roostv1.PoolSpec)) *roostv1.Object {
	spec := &roostv1.PoolSpec{Cluster: cluster, MachineClass: "standard", ImageChannel: "stable", Replicas: proto.Int32(3)}
	for _, m := range mods {
		m(spec)
	}
	return resource.Wrap(&roostv1.Pool{Metadata: meta(name, nil), Spec: spec})
}

// baseObjects are what a Pool "workers" of Cluster "prod" needs.
func baseObjects() []*roostv1.Object {
	return []*roostv1.Object{clusterObj("prod", nil), machineClassObj("standard")}
}

// ---- assertions

// wantCode fails unless err is an *apierror.Error with code.
func wantCode(tb testing.TB, err error, code codes.Code) *apierror.Error {
	tb.Helper()
	var e *apierror.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error = %v (%T), want *apierror.Error with code %v", err, err, code)
	}
	if e.Code != code {
		tb.Fatalf("error code = %v (%v), want %v", e.Code, e, code)
	}
	return e
}

func actions(res *ApplyResult) []string {
	var out []string
	for _, r := range res.Results {
		out = append(out, r.GetKind()+"/"+r.GetName()+"="+r.GetAction())
	}
	return out
}

// ---- snapshots

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.canceled = true; return nil }

// snapshotBytes takes and persists a snapshot of f.
func snapshotBytes(tb testing.TB, f *FSM) []byte {
	tb.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		tb.Fatal(err)
	}
	if !sink.closed || sink.canceled {
		tb.Fatalf("sink closed=%v canceled=%v after Persist", sink.closed, sink.canceled)
	}
	return sink.Bytes()
}

// restoreNew restores data into a fresh FSM.
func restoreNew(tb testing.TB, data []byte) *FSM {
	tb.Helper()
	f := New(Options{})
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		tb.Fatal(err)
	}
	return f
}

func ioNopCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
