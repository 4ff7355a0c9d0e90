package hub_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/vincent-petithory/dataurl"

	agentconfig "github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/imagebuilder/enrollconfig"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/internal/cpio"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"google.golang.org/grpc/codes"
)

// TestNetboot: with --boot-addr, an operator's CreateEnrollmentToken with
// netboot makes a network boot URL; a client without any credential but
// the URL fetches the iPXE script, then the kernel, the initrd and the
// config initrd it names, and the config holds an agent configuration
// with the token (the one the hub stored the hash of), the hub CA and the
// hub's address, and the roost-agent extension the release lacks. No boot
// request writes to Raft. A tampered URL, a download token moved to
// another file and the URL of a revoked or expired token are refused with
// 403 and a reason; everything is Cache-Control: no-store.
func TestNetboot(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{BootAddr: "127.0.0.1:0"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	c := dial(t, filepath.Join(dir, "admin.conf"))
	ctx := context.Background()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	kernel, initrd, agent := []byte("MZ a kernel"), []byte("070701 a release initrd"), []byte("hsqs the roost-agent extension")
	for _, b := range [][]byte{kernel, initrd, agent} {
		pushBlob(t, c, b, false)
	}
	rel := signedRelease(t, "2026.11.0", kernel, initrd, priv)
	rel.Spec.Components = map[string]string{"kubelet": "v1.34.4"} // no roost-agent: the extension must come along
	if _, err := c.PutImageRelease(ctx, &roostv1.PutImageReleaseRequest{Release: rel}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{signedExtension(t, "roost-agent", "0.9.0", agent, priv)}}); err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	if _, err := c.TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{PublicKeyPem: pubPEM}); err != nil {
		t.Fatal(err)
	}

	// refused requests: no release, no expiry
	for _, req := range []*roostv1.CreateEnrollmentTokenRequest{
		{TtlSeconds: 3600, Netboot: &roostv1.NetbootSelector{Version: "2027.1.0"}},
		{TtlSeconds: 3600, Netboot: &roostv1.NetbootSelector{Channel: "nightly"}},
		{Netboot: &roostv1.NetbootSelector{Version: "2026.11.0"}},
		{TtlSeconds: 3600, Netboot: &roostv1.NetbootSelector{}},
	} {
		if _, err := c.CreateEnrollmentToken(ctx, req); err == nil {
			t.Errorf("CreateEnrollmentToken(%v) succeeded, want refused", req)
		} else if code := apierror.Code(err); code != codes.InvalidArgument && code != codes.FailedPrecondition {
			t.Errorf("CreateEnrollmentToken(%v): %v, want InvalidArgument or FailedPrecondition", req, err)
		}
	}

	resp, err := c.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600, Netboot: &roostv1.NetbootSelector{Version: "2026.11.0"}})
	if err != nil {
		t.Fatal(err)
	}
	bootURL := resp.GetNetbootUrl()
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/boot/\d+\.[a-z0-9]{6}\.r-v2026-11-0\.[A-Za-z0-9_-]{22}/ipxe$`).MatchString(bootURL) {
		t.Fatalf("boot URL %q", bootURL)
	}
	if len(bootURL) >= 128 {
		t.Errorf("boot URL is %d bytes, want < 128 (the BOOTP file field)", len(bootURL))
	}
	get := func(u string) (int, []byte) {
		t.Helper()
		r, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", u, cc)
		}
		return r.StatusCode, b
	}
	// What a boot request could write: the token (its uses) and Servers.
	// (The applied index is no measure: controllers write on their own.)
	tokenName := resp.GetEnrollmentToken().GetMetadata().GetName()
	writable := func() string {
		t.Helper()
		o, err := h.FSM().Get("EnrollmentToken", tokenName)
		if err != nil {
			t.Fatal(err)
		}
		servers, _, err := h.FSM().List("Server", "")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("token modified at %d, %d servers", o.GetEnrollmentToken().GetMetadata().GetModifyIndex(), len(servers))
	}
	before := writable()

	code, script := get(bootURL)
	if code != http.StatusOK {
		t.Fatalf("GET script: %d %s", code, script)
	}
	lines := strings.Split(strings.TrimSpace(string(script)), "\n")
	if len(lines) != 6 || lines[0] != "#!ipxe" || !strings.HasPrefix(lines[2], "kernel http://") ||
		!strings.HasPrefix(lines[3], "initrd --name initrd http://") || !strings.HasPrefix(lines[4], "initrd --name config.img http://") || lines[5] != "boot" {
		t.Fatalf("script:\n%s", script)
	}
	kernelURL := strings.Fields(lines[2])[1]
	if !strings.Contains(lines[2], "initrd=initrd initrd=config.img console=tty0") {
		t.Errorf("kernel line %q lacks the initrd names and console arguments", lines[2])
	}
	initrdURL, configURL := strings.Fields(lines[3])[3], strings.Fields(lines[4])[3]
	if code, b := get(kernelURL); code != http.StatusOK || !bytes.Equal(b, kernel) {
		t.Fatalf("GET kernel: %d %q", code, b)
	}
	// padded with zeros to a multiple of 4 bytes, for the config initrd
	// loaded after it
	if code, b := get(initrdURL); code != http.StatusOK || !bytes.Equal(b, append(slices.Clone(initrd), 0)) {
		t.Fatalf("GET initrd: %d %q, want the %d bytes and one zero", code, b, len(initrd))
	}
	code, cfgInitrd := get(configURL)
	if code != http.StatusOK {
		t.Fatalf("GET config: %d %s", code, cfgInitrd)
	}
	files, err := cpio.Read(cfgInitrd)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["etc/extensions/roost-agent.raw"], agent) {
		t.Errorf("config initrd files %v: want the roost-agent extension at /etc/extensions/roost-agent.raw", slices.Collect(maps.Keys(files)))
	}
	ac := agentConfigOf(t, files[strings.TrimPrefix(enrollconfig.ConfigPath, "/")])
	sum := sha256.Sum256([]byte(ac.Token))
	if hex.EncodeToString(sum[:]) != resp.GetEnrollmentToken().GetSpec().GetSecretSha256() || !strings.HasPrefix(ac.Token, resp.GetEnrollmentToken().GetMetadata().GetName()+".") {
		t.Errorf("config token %q is not the enrollment token %s the hub stored", ac.Token, resp.GetEnrollmentToken().GetMetadata().GetName())
	}
	if ac.Token != resp.GetToken() {
		t.Errorf("config token differs from the one CreateEnrollmentToken returned")
	}
	if len(ac.Hubs) != 1 || ac.Hubs[0] != h.APIAddr() {
		t.Errorf("config hubs %v, want [%s]", ac.Hubs, h.APIAddr())
	}
	if len(ac.ReleaseKeys) != 1 || strings.TrimSpace(ac.ReleaseKeys[0]) != strings.TrimSpace(pubPEM) {
		t.Errorf("config release keys %q, want the trusted key", ac.ReleaseKeys)
	}
	if !strings.Contains(ac.CABundle, "BEGIN CERTIFICATE") || strings.Contains(string(cfgInitrd), "PRIVATE KEY") {
		t.Errorf("config CA bundle %q (or a private key in the initrd)", ac.CABundle)
	}
	if got := writable(); got != before {
		t.Errorf("the boot requests wrote: %s, then %s", before, got)
	}

	// refusals
	grant := strings.TrimSuffix(strings.TrimPrefix(bootURL[strings.Index(bootURL, "/boot/"):], "/boot/"), "/ipxe")
	tampered := strings.Replace(bootURL, ".r-v2026-11-0.", ".r-v2026-12-0.", 1)
	if code, b := get(tampered); code != http.StatusForbidden || !strings.Contains(string(b), "does not verify") {
		t.Errorf("tampered URL: %d %s, want 403", code, b)
	}
	longer := strings.Replace(bootURL, "/boot/"+grant[:10], "/boot/"+"9999999999", 1)
	if code, _ := get(longer); code != http.StatusForbidden {
		t.Errorf("URL with a later expiry: %d, want 403", code)
	}
	moved := strings.TrimSuffix(kernelURL, "/kernel") + "/config.img"
	if code, b := get(moved); code != http.StatusForbidden {
		t.Errorf("the kernel's download token for the config: %d %s, want 403", code, b)
	}
	if _, err := c.RevokeEnrollmentToken(ctx, &roostv1.RevokeEnrollmentTokenRequest{Name: resp.GetEnrollmentToken().GetMetadata().GetName()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the revocation applied", func() bool { code, _ := get(bootURL); return code == http.StatusForbidden })
	if code, b := get(configURL); code != http.StatusForbidden || !strings.Contains(string(b), "revoked") {
		t.Errorf("config of a revoked token: %d %s, want 403 revoked", code, b)
	}

	short, err := c.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 1, Netboot: &roostv1.NetbootSelector{Version: "2026.11.0"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if code, b := get(short.GetNetbootUrl()); code != http.StatusForbidden || !strings.Contains(string(b), "expired") {
		t.Errorf("expired URL: %d %s, want 403 expired", code, b)
	}
}

// agentConfigOf is the agent configuration an Ignition config writes.
func agentConfigOf(t *testing.T, ign []byte) *agentconfig.AgentConfig {
	t.Helper()
	cfg, _, err := v3_3.Parse(ign)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	for _, f := range cfg.Storage.Files {
		if f.Path != ignition.AgentConfigPath || f.Contents.Source == nil {
			continue
		}
		du, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			t.Fatal(err)
		}
		ac, err := agentconfig.Parse(du.Data)
		if err != nil {
			t.Fatal(err)
		}
		return ac
	}
	t.Fatalf("the config writes no %s", ignition.AgentConfigPath)
	return nil
}

// TestNetbootOnAFollower: a member that does not lead makes the network
// boot token through the leader (which has no boot listener) and signs
// the URL of its own listener, which serves the script and the kernel;
// the config lists both members.
func TestNetbootOnAFollower(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	leader := startHub(t, dirs[0], hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(leader.AdminConfigPath()); return err == nil })
	admin := dial(t, leader.AdminConfigPath(), leader.APIAddr())
	ctx := context.Background()
	tok, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 1})
	if err != nil {
		t.Fatal(err)
	}
	follower := startHub(t, dirs[1], hub.Options{NodeID: "hub-b", Join: leader.APIAddr(), JoinToken: tok.GetToken(), BootAddr: "127.0.0.1:0"})
	c := dial(t, leader.AdminConfigPath(), follower.APIAddr())
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	kernel, initrd := []byte("MZ kernel"), []byte("initrd with the agent")
	for _, b := range [][]byte{kernel, initrd} {
		pushBlob(t, admin, b, false)
		pushBlob(t, c, b, false)
	}
	rel := signedRelease(t, "2026.11.0", kernel, initrd, priv)
	rel.Spec.Components = map[string]string{"roost-agent": "0.9.0"} // the OS ships the agent: no extension
	if _, err := c.PutImageRelease(ctx, &roostv1.PutImageReleaseRequest{Release: rel}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 60, Netboot: &roostv1.NetbootSelector{Version: "2026.11.0"}}); apierror.Code(err) != codes.FailedPrecondition {
		t.Errorf("netboot on the leader without --boot-addr: %v, want FailedPrecondition", err)
	}
	var resp *roostv1.CreateEnrollmentTokenResponse
	waitFor(t, "the release on the follower", func() bool {
		resp, err = c.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 600, Netboot: &roostv1.NetbootSelector{Version: "2026.11.0"}})
		return err == nil
	})
	r, err := http.Get(resp.GetNetbootUrl())
	if err != nil {
		t.Fatal(err)
	}
	script, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("script from the follower: %d %s", r.StatusCode, script)
	}
	lines := strings.Split(string(script), "\n")
	r, err = http.Get(strings.Fields(lines[2])[1])
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || !bytes.Equal(got, kernel) {
		t.Fatalf("kernel from the follower: %d %q", r.StatusCode, got)
	}
	r, err = http.Get(strings.Fields(lines[4])[3])
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := io.ReadAll(r.Body)
	r.Body.Close()
	files, err := cpio.Read(cfg)
	if err != nil || len(files) != 1 {
		t.Fatalf("config initrd: %v, %d files (want the config only: the release ships the agent)", err, len(files))
	}
	ac := agentConfigOf(t, files[strings.TrimPrefix(enrollconfig.ConfigPath, "/")])
	if !slices.Contains(ac.Hubs, leader.APIAddr()) || !slices.Contains(ac.Hubs, follower.APIAddr()) || ac.Token != resp.GetToken() {
		t.Errorf("config hubs %v token ok %t, want both members and the token", ac.Hubs, ac.Token == resp.GetToken())
	}
}
