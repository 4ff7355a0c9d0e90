package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/syncbuf"
)

// testNow is the clock of every test run.
var testNow = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)

type result struct {
	out, err string
	code     int
}

// runCLI runs roostctl with args and stdin, capturing its output.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runCLIContext(t, context.Background(), stdin, args...)
}

func runCLIContext(t *testing.T, ctx context.Context, stdin string, args ...string) result {
	t.Helper()
	var out, errb syncbuf.Buffer
	return runCLIStreams(ctx, stdin, &out, &errb, args...)
}

func runCLIStreams(ctx context.Context, stdin string, out, errb *syncbuf.Buffer, args ...string) result {
	o := &options{
		Streams: Streams{In: strings.NewReader(stdin), Out: out, Err: errb},
		timeout: 30 * time.Second,
		now:     func() time.Time { return testNow },
	}
	code := o.run(ctx, args)
	return result{out: out.String(), err: errb.String(), code: code}
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testPKI is a CA and a hub server certificate for fake hubs.
type testPKI struct {
	caPEM  []byte
	server tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	now := time.Now()
	authorityPB, err := ca.New("test CA", now)
	if err != nil {
		t.Fatal(err)
	}
	authority, err := ca.Load(authorityPB)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := authority.Issue(ca.Profile{CommonName: "hub-test", Role: ca.RoleMember, DNSNames: []string{ca.ServerName}, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{caPEM: authority.CertificatePEM(), server: cert}
}

// writeConfig writes a client configuration for hubs and returns its path.
func (p *testPKI) writeConfig(t *testing.T, hubs ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	cfg := &client.Config{Hubs: hubs, CertificateAuthority: string(p.caPEM)}
	if err := cfg.Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeHub is an in-memory HubService with just enough behaviour for the
// CLI's tests.
type fakeHub struct {
	roostv1.UnimplementedHubServiceServer

	mu      sync.Mutex
	objects map[string]*roostv1.Object
	index   uint64
	// applyErr, when set, is returned by Apply.
	applyErr error
	// conflicts makes the next so many Applies fail with Aborted, as the
	// hub does when an object changed since it was read.
	conflicts int
	applies   []*roostv1.ApplyRequest
	deletes   []string
	gets      []*roostv1.GetRequest
	lists     []*roostv1.ListRequest
	members   []*roostv1.Member
	removed   []string
	updated   []string // names given to UpdateServer and RevokeEnrollmentToken
	// events are sent on every Watch after the current objects.
	events []*roostv1.WatchEvent
	// watches counts Watch calls; watchFail makes the first ones fail.
	watches, watchFail int
	// watchEnd, when set, ends the next Watch stream after its events
	// (then it is cleared).
	watchEnd error
	// listDelay delays List answers.
	listDelay time.Duration
}

func key(kind, name string) string { return kind + "/" + name }

func newFakeHub() *fakeHub { return &fakeHub{objects: map[string]*roostv1.Object{}} }

func (f *fakeHub) put(o *roostv1.Object) {
	_, k := resource.Unwrap(o)
	f.objects[key(k.Name, resource.NameOf(o))] = o
}

func (f *fakeHub) Apply(_ context.Context, req *roostv1.ApplyRequest) (*roostv1.ApplyResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applies = append(f.applies, req)
	if f.applyErr != nil {
		return nil, f.applyErr
	}
	if f.conflicts > 0 {
		f.conflicts--
		f.index++
		msg := fmt.Sprintf("modified since it was read (modifyIndex 9, now %d)", f.index+100)
		return nil, apierror.Aborted("cluster/prod: "+msg+": get it again and re-apply your change, or remove metadata.modifyIndex to overwrite",
			apierror.Violation{Field: "objects[0].metadata.modifyIndex", Message: msg,
				Hint: "get it again and re-apply your change, or remove metadata.modifyIndex to overwrite"})
	}
	resp := &roostv1.ApplyResponse{}
	for _, o := range req.GetObjects() {
		_, k := resource.Unwrap(o)
		name := resource.NameOf(o)
		action := "created"
		if old, ok := f.objects[key(k.Name, name)]; ok {
			action = "configured"
			if proto.Equal(old, o) {
				action = "unchanged"
			}
		}
		if !req.GetDryRun() {
			f.objects[key(k.Name, name)] = o
		}
		resp.Results = append(resp.Results, &roostv1.ApplyResult{Kind: k.Name, Name: name, Action: action})
	}
	if !req.GetDryRun() {
		f.index++
		resp.Index = f.index
	}
	return resp, nil
}

func (f *fakeHub) Get(_ context.Context, req *roostv1.GetRequest) (*roostv1.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, req)
	o, ok := f.objects[key(req.GetKind(), req.GetName())]
	if !ok {
		return nil, apierror.NotFound(req.GetKind(), req.GetName())
	}
	return &roostv1.GetResponse{Object: o}, nil
}

func (f *fakeHub) List(_ context.Context, req *roostv1.ListRequest) (*roostv1.ListResponse, error) {
	time.Sleep(f.listDelay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, req)
	var out []*roostv1.Object
	for _, o := range f.objects {
		if _, k := resource.Unwrap(o); k.Name == req.GetKind() {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return resource.NameOf(out[i]) < resource.NameOf(out[j]) })
	return &roostv1.ListResponse{Objects: out, Index: f.index}, nil
}

func (f *fakeHub) Delete(_ context.Context, req *roostv1.DeleteRequest) (*roostv1.DeleteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, key(req.GetKind(), req.GetName()))
	if _, ok := f.objects[key(req.GetKind(), req.GetName())]; !ok {
		return nil, apierror.NotFound(req.GetKind(), req.GetName())
	}
	delete(f.objects, key(req.GetKind(), req.GetName()))
	f.index++
	return &roostv1.DeleteResponse{Index: f.index}, nil
}

// UpdateServer and RevokeEnrollmentToken answer NotFound for objects the
// fake does not hold and record the names they were asked about.
func (f *fakeHub) UpdateServer(_ context.Context, req *roostv1.UpdateServerRequest) (*roostv1.UpdateServerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updated = append(f.updated, req.GetName())
	o, ok := f.objects[key("Server", req.GetName())]
	if !ok {
		return nil, apierror.NotFound("Server", req.GetName())
	}
	return &roostv1.UpdateServerResponse{Server: o.GetServer()}, nil
}

func (f *fakeHub) RevokeEnrollmentToken(_ context.Context, req *roostv1.RevokeEnrollmentTokenRequest) (*roostv1.RevokeEnrollmentTokenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updated = append(f.updated, req.GetName())
	if _, ok := f.objects[key("EnrollmentToken", req.GetName())]; !ok {
		return nil, apierror.NotFound("EnrollmentToken", req.GetName())
	}
	return &roostv1.RevokeEnrollmentTokenResponse{}, nil
}

func (f *fakeHub) Watch(req *roostv1.WatchRequest, stream grpc.ServerStreamingServer[roostv1.WatchEvent]) error {
	f.mu.Lock()
	f.watches++
	if f.watches <= f.watchFail {
		f.mu.Unlock()
		return status.Error(codes.Unavailable, "member shutting down")
	}
	var evs []*roostv1.WatchEvent
	if req.GetFromIndex() == 0 {
		var names []string
		for k, o := range f.objects {
			if _, kind := resource.Unwrap(o); kind.Name == req.GetKind() {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			evs = append(evs, &roostv1.WatchEvent{Type: roostv1.WatchEvent_TYPE_ADDED, Object: f.objects[n], Index: f.index})
		}
	}
	for _, ev := range f.events {
		if ev.GetIndex() > req.GetFromIndex() {
			evs = append(evs, ev)
		}
	}
	f.mu.Unlock()
	for _, ev := range evs {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	f.mu.Lock()
	end := f.watchEnd
	f.watchEnd = nil
	f.mu.Unlock()
	if end != nil {
		return end
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

func (f *fakeHub) ListMembers(context.Context, *roostv1.ListMembersRequest) (*roostv1.ListMembersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &roostv1.ListMembersResponse{Members: f.members, Index: f.index}, nil
}

func (f *fakeHub) CreateJoinToken(_ context.Context, req *roostv1.CreateJoinTokenRequest) (*roostv1.CreateJoinTokenResponse, error) {
	ttl := time.Duration(req.GetTtlSeconds()) * time.Second
	return &roostv1.CreateJoinTokenResponse{
		Token:        "R1abc::id.secret",
		ExpiresAt:    timestamppb.New(testNow.Add(ttl)),
		ApiAddresses: []string{"10.0.0.1:7443", "10.0.0.2:7443"},
	}, nil
}

func (f *fakeHub) RemoveMember(_ context.Context, req *roostv1.RemoveMemberRequest) (*roostv1.RemoveMemberResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.GetId() == req.GetId() {
			f.removed = append(f.removed, req.GetId())
			return &roostv1.RemoveMemberResponse{}, nil
		}
	}
	return nil, apierror.NotFound("member", req.GetId())
}

// startFakeHub serves f over TLS on loopback and returns a client
// configuration file pointing at it.
func startFakeHub(t *testing.T, f *fakeHub) (configPath, addr string) {
	t.Helper()
	pki := newTestPKI(t)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS13})))
	roostv1.RegisterHubServiceServer(srv, f)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return pki.writeConfig(t, ln.Addr().String()), ln.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Manifests used by the tests.
const clusterYAML = `apiVersion: roost.io/v1
kind: Cluster
metadata:
  name: prod
spec:
  apiEndpoint: https://10.0.0.1:6443
  kubernetesVersion: v1.34.4
`

const poolYAML = `apiVersion: roost.io/v1
kind: Pool
metadata:
  name: workers
  labels:
    env: prod
spec:
  cluster: prod
  imageChannel: stable
  replicas: 3
`

// mustDecode decodes a manifest in tests.
func mustDecode(t *testing.T, yaml string) []*roostv1.Object {
	t.Helper()
	ms, err := resource.Decode([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []*roostv1.Object
	for _, m := range ms {
		out = append(out, m.Object)
	}
	return out
}
