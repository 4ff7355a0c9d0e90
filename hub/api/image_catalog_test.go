package api_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// startMember starts one hub member on loopback with fast Raft timings.
func startMember(t *testing.T, id, join, token string) *hub.Hub {
	t.Helper()
	h, err := hub.Start(context.Background(), hub.Options{
		DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", NodeID: id, Join: join, JoinToken: token,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RaftLogOutput: io.Discard,
	})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// threeMembers starts hub-a and joins hub-b and hub-c; it returns them and
// an admin connection to each (in that order).
func threeMembers(t *testing.T) ([]*hub.Hub, []*grpc.ClientConn) {
	t.Helper()
	a := startMember(t, "hub-a", "", "")
	eventually(t, "admin.conf", func() bool { _, err := client.LoadConfig(a.AdminConfigPath()); return err == nil })
	cfg, err := client.LoadConfig(a.AdminConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	dial := func(addr string) *grpc.ClientConn {
		c, err := client.Dial(context.Background(), cfg, []string{addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	connA := dial(a.APIAddr())
	ctx := context.Background()
	tok, err := roostv1.NewHubServiceClient(connA).CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	hubs := []*hub.Hub{a, startMember(t, "hub-b", a.APIAddr(), tok.GetToken()), startMember(t, "hub-c", a.APIAddr(), tok.GetToken())}
	eventually(t, "3 members with API addresses on every member", func() bool {
		for _, h := range hubs {
			n := 0
			for _, m := range h.FSM().Members() {
				if m.GetApiAddress() != "" {
					n++
				}
			}
			if n != 3 {
				return false
			}
		}
		return true
	})
	return hubs, []*grpc.ClientConn{connA, dial(hubs[1].APIAddr()), dial(hubs[2].APIAddr())}
}

// testRelease is a signed release held in memory.
type testRelease struct {
	spec    *roostv1.ImageReleaseSpec
	kernel  []byte
	initrd  []byte
	signer  ed25519.PublicKey
	pemFile []byte
}

func newRelease(t *testing.T, version string, priv ed25519.PrivateKey) *testRelease {
	t.Helper()
	if priv == nil {
		var err error
		if _, priv, err = ed25519.GenerateKey(nil); err != nil {
			t.Fatal(err)
		}
	}
	pub := priv.Public().(ed25519.PublicKey)
	r := &testRelease{kernel: bytes.Repeat([]byte("K"+version), (3<<20)/len(version)), initrd: []byte("initrd of " + version), signer: pub,
		pemFile: releasesig.MarshalPublicKeyPEM(pub)}
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	m := release.Manifest{APIVersion: release.APIVersion, Kind: release.ReleaseKind, Name: "test", Version: version, KeyID: release.KeyID(pub),
		Artifacts: []release.Artifact{{Name: "initrd", File: release.InitrdFile, Size: int64(len(r.initrd)), SHA256: sum(r.initrd)},
			{Name: "kernel", File: release.KernelFile, Size: int64(len(r.kernel)), SHA256: sum(r.kernel)}}}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	r.spec = &roostv1.ImageReleaseSpec{Version: version, Manifest: manifest, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, manifest)),
		Kernel: &roostv1.Artifact{Sha256: sum(r.kernel), Size: int64(len(r.kernel))}, Initrd: &roostv1.Artifact{Sha256: sum(r.initrd), Size: int64(len(r.initrd))}}
	return r
}

func push(t *testing.T, conn *grpc.ClientConn, data []byte) {
	t.Helper()
	h := sha256.Sum256(data)
	stream, err := roostv1.NewHubServiceClient(conn).PushArtifact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data) || off == 0; off += 1 << 20 {
		req := &roostv1.PushArtifactRequest{Data: data[off:min(off+1<<20, len(data))]}
		if off == 0 {
			req.Sha256, req.Size = hex.EncodeToString(h[:]), int64(len(data))
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := stream.CloseAndRecv(); err != nil || resp.GetSize() != int64(len(data)) {
		t.Fatalf("push: %v %v", resp, err)
	}
}

func fetch(conn *grpc.ClientConn, digest string) ([]byte, error) {
	stream, err := roostv1.NewAgentServiceClient(conn).FetchArtifact(context.Background(), &roostv1.FetchArtifactRequest{Sha256: digest})
	if err != nil {
		return nil, err
	}
	var out []byte
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c.GetData()...)
	}
}

func stored(t *testing.T, conn *grpc.ClientConn, digest string) bool {
	t.Helper()
	st, err := roostv1.NewHubServiceClient(conn).StatArtifact(context.Background(), &roostv1.StatArtifactRequest{Sha256: digest})
	if err != nil {
		t.Fatal(err)
	}
	return st.GetComplete()
}

func putRelease(conn *grpc.ClientConn, r *testRelease) (*roostv1.PutImageReleaseResponse, []string, error) {
	var hdr metadata.MD
	resp, err := roostv1.NewHubServiceClient(conn).PutImageRelease(context.Background(),
		&roostv1.PutImageReleaseRequest{Release: &roostv1.ImageRelease{Spec: r.spec}}, grpc.Header(&hdr))
	return resp, hdr.Get(api.WarningHeader), err
}

// TestCatalogThreeMembers pushes a release to one member of a three-member
// hub and uses it through the others: they copy the artifacts from their
// peers. It also covers trusted keys and promotion through followers.
func TestCatalogThreeMembers(t *testing.T) {
	hubs, conns := threeMembers(t)
	ctx := context.Background()
	a, b, c := conns[0], conns[1], conns[2]
	r1 := newRelease(t, "2026.11.0", nil)
	push(t, a, r1.kernel)
	push(t, a, r1.initrd)
	if stored(t, b, r1.spec.Kernel.Sha256) || stored(t, c, r1.spec.Kernel.Sha256) {
		t.Fatal("the other members hold the kernel before anyone asked")
	}

	// No key is trusted: member C records the release (copying both
	// artifacts from A) and warns.
	resp, warnings, err := putRelease(c, r1)
	if err != nil {
		t.Fatalf("PutImageRelease via hub-c: %v", err)
	}
	if resp.GetRelease().GetMetadata().GetName() != "v2026-11-0" || len(warnings) != 1 || !strings.Contains(warnings[0], "roostctl image trust add") {
		t.Fatalf("PutImageRelease: %v, warnings %q", resp.GetRelease().GetMetadata(), warnings)
	}
	if !stored(t, c, r1.spec.Kernel.Sha256) || !stored(t, c, r1.spec.Initrd.Sha256) {
		t.Fatal("hub-c did not copy the artifacts")
	}

	// An agent (here the admin) fetches the kernel through hub-b, which
	// copies it from a peer, verifies it and serves it.
	got, err := fetch(b, r1.spec.Kernel.Sha256)
	if err != nil || !bytes.Equal(got, r1.kernel) {
		t.Fatalf("FetchArtifact via hub-b: %d bytes, %v", len(got), err)
	}
	if !stored(t, b, r1.spec.Kernel.Sha256) {
		t.Fatal("hub-b did not keep the kernel")
	}
	missing := strings.Repeat("0", 64)
	_, err = fetch(b, missing)
	if apierror.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "hub member hub-a") || !strings.Contains(err.Error(), "hub member hub-c") {
		t.Fatalf("FetchArtifact of a blob nobody has: %v", err)
	}

	// FetchBlob is for members only.
	fs, err := roostv1.NewMemberServiceClient(b).FetchBlob(ctx, &roostv1.FetchArtifactRequest{Sha256: r1.spec.Kernel.Sha256})
	if err == nil {
		_, err = fs.Recv()
	}
	if apierror.Code(err) != codes.PermissionDenied {
		t.Fatalf("FetchBlob with an admin certificate: %v", err)
	}

	// A member certificate may: from an offset, and past the end (the
	// size alone, so a caller can drop a bad partial copy).
	mc := memberConn(t, hubs[1], hubs[0].APIAddr())
	chunks := fetchBlob(t, mc, r1.spec.Initrd.Sha256, 5)
	if len(chunks) != 1 || chunks[0].GetSize() != int64(len(r1.initrd)) || !bytes.Equal(chunks[0].GetData(), r1.initrd[5:]) {
		t.Fatalf("FetchBlob from 5: %v", chunks)
	}
	chunks = fetchBlob(t, mc, r1.spec.Initrd.Sha256, 1000)
	if len(chunks) != 1 || chunks[0].GetSize() != int64(len(r1.initrd)) || len(chunks[0].GetData()) != 0 {
		t.Fatalf("FetchBlob past the end: %v", chunks)
	}
	fs, err = roostv1.NewMemberServiceClient(mc).FetchBlob(ctx, &roostv1.FetchArtifactRequest{Sha256: missing})
	if err == nil {
		_, err = fs.Recv()
	}
	if apierror.Code(err) != codes.NotFound {
		t.Fatalf("FetchBlob of a missing blob: %v", err)
	}

	// Trusted keys, through followers.
	hb := roostv1.NewHubServiceClient(b)
	other := newRelease(t, "2026.12.0", nil)
	k, err := hb.TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{PublicKeyPem: string(other.pemFile), Comment: "beta team"})
	if err != nil {
		t.Fatal(err)
	}
	if k.GetKey().GetId() != releasesig.KeyID(other.signer) || k.GetKey().GetAddedAt() == nil {
		t.Fatalf("TrustReleaseKey = %v", k.GetKey())
	}
	again, err := roostv1.NewHubServiceClient(c).TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{PublicKeyPem: string(other.pemFile)})
	if err != nil || again.GetKey().GetId() != k.GetKey().GetId() || again.GetKey().GetComment() != "beta team" {
		t.Fatalf("trusting the key again: %v %v", again, err)
	}
	if _, err := hb.TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{PublicKeyPem: "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"}); apierror.Code(err) != codes.InvalidArgument {
		t.Fatalf("trusting a private key: %v", err)
	}

	// A release signed by another key is refused now, naming the key.
	r2 := newRelease(t, "2026.11.1", nil)
	push(t, a, r2.kernel)
	push(t, a, r2.initrd)
	_, _, err = putRelease(b, r2)
	if apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), release.KeyID(r2.signer)) || !strings.Contains(err.Error(), "roostctl image trust add") {
		t.Fatalf("release signed by an untrusted key: %v", err)
	}
	if _, err := hb.TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{PublicKeyPem: string(r2.pemFile)}); err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := putRelease(b, r2); err != nil || len(warnings) != 0 {
		t.Fatalf("release signed by a trusted key: %v, warnings %q", err, warnings)
	}
	keys, err := roostv1.NewHubServiceClient(c).ListTrustedKeys(ctx, &roostv1.ListTrustedKeysRequest{})
	if err != nil || len(keys.GetKeys()) != 2 {
		t.Fatalf("ListTrustedKeys: %v %v", keys, err)
	}

	// Untrust by prefix; unknown and malformed ids.
	if _, err := hb.UntrustReleaseKey(ctx, &roostv1.UntrustReleaseKeyRequest{Id: k.GetKey().GetId()[:12]}); err != nil {
		t.Fatal(err)
	}
	if _, err := hb.UntrustReleaseKey(ctx, &roostv1.UntrustReleaseKeyRequest{Id: k.GetKey().GetId()}); apierror.Code(err) != codes.NotFound {
		t.Fatalf("untrusting twice: %v", err)
	}
	if _, err := hb.UntrustReleaseKey(ctx, &roostv1.UntrustReleaseKeyRequest{Id: "xyz"}); apierror.Code(err) != codes.InvalidArgument {
		t.Fatalf("untrusting xyz: %v", err)
	}

	// Promotion through a follower; releases stay otherwise immutable.
	p, err := hb.PromoteImageRelease(ctx, &roostv1.PromoteImageReleaseRequest{Version: "2026.11.0", Channel: "stable"})
	if err != nil || !slices.Equal(p.GetRelease().GetSpec().GetChannels(), []string{"stable"}) {
		t.Fatalf("promote: %v %v", p, err)
	}
	_, err = hb.PromoteImageRelease(ctx, &roostv1.PromoteImageReleaseRequest{Version: "2026.11.0", Channel: "Not A Label"})
	if e := apierror.FromError(err); e.Code != codes.InvalidArgument || len(e.Violations) != 1 || e.Violations[0].Field != "channel" {
		t.Fatalf("bad channel: %v", err)
	}
	if _, err := hb.PromoteImageRelease(ctx, &roostv1.PromoteImageReleaseRequest{Version: "1999.1.0", Channel: "stable"}); apierror.Code(err) != codes.NotFound {
		t.Fatalf("unknown version: %v", err)
	}
	p, err = roostv1.NewHubServiceClient(c).PromoteImageRelease(ctx, &roostv1.PromoteImageReleaseRequest{Version: "2026.11.0", Channel: "stable", Remove: true})
	if err != nil || len(p.GetRelease().GetSpec().GetChannels()) != 0 {
		t.Fatalf("remove from stable: %v %v", p, err)
	}

	// An unused release can be deleted.
	if _, err := hb.Delete(ctx, &roostv1.DeleteRequest{Kind: "ImageRelease", Name: "v2026-11-1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delete on every member", func() bool {
		for _, h := range hubs {
			if _, err := h.FSM().Get("ImageRelease", "v2026-11-1"); err == nil {
				return false
			}
		}
		return true
	})
}

// memberConn dials addr with member h's certificate, as members dial
// each other.
func memberConn(t *testing.T, h *hub.Hub, addr string) *grpc.ClientConn {
	t.Helper()
	dir := filepath.Join(filepath.Dir(h.AdminConfigPath()), "tls")
	cert, key, pool, err := ca.ReadFiles(filepath.Join(dir, "member.crt"), filepath.Join(dir, "member.key"), filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tlsconfig.ClientTLS(cert, key, pool)
	if err != nil {
		t.Fatal(err)
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func fetchBlob(t *testing.T, conn *grpc.ClientConn, digest string, offset int64) []*roostv1.ArtifactChunk {
	t.Helper()
	stream, err := roostv1.NewMemberServiceClient(conn).FetchBlob(context.Background(), &roostv1.FetchArtifactRequest{Sha256: digest, Offset: offset})
	if err != nil {
		t.Fatal(err)
	}
	var out []*roostv1.ArtifactChunk
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("FetchBlob(%s, %d): %v", digest, offset, err)
		}
		out = append(out, c)
	}
}
