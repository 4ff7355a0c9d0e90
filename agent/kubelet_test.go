package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/internal/fakehub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const (
	bootToken1 = "abc123.s3cr3tfirst00000"
	bootToken2 = "def456.s3cr3tsecond0000"
)

func TestKubeletBootstrapKubeconfig(t *testing.T) {
	data, err := agent.KubeletBootstrapKubeconfig(&roostv1.KubeletBootstrap{ApiServer: "https://10.0.0.1:6443", Token: bootToken1})
	if err != nil {
		t.Fatal(err)
	}
	// client-go reads it as the kubelet will.
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("not a kubeconfig: %v\n%s", err, data)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		t.Fatalf("current context %q missing:\n%s", cfg.CurrentContext, data)
	}
	cl, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cl == nil || user == nil {
		t.Fatalf("context %+v names a missing cluster or user:\n%s", ctx, data)
	}
	if cl.Server != "https://10.0.0.1:6443" || cl.CertificateAuthority != "/etc/kubernetes/pki/ca.crt" || len(cl.CertificateAuthorityData) != 0 || cl.InsecureSkipTLSVerify {
		t.Errorf("cluster %+v", cl)
	}
	if user.Token != bootToken1 || user.ClientCertificate != "" || user.Username != "" {
		t.Errorf("user %+v", user)
	}
	if len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 || len(cfg.Contexts) != 1 {
		t.Errorf("more than one cluster, user or context:\n%s", data)
	}

	for name, b := range map[string]*roostv1.KubeletBootstrap{
		"http":         {ApiServer: "http://10.0.0.1:6443", Token: bootToken1},
		"no host":      {ApiServer: "https://", Token: bootToken1},
		"no server":    {Token: bootToken1},
		"short secret": {ApiServer: "https://10.0.0.1:6443", Token: "abc123.s3cr3t"},
		"upper case":   {ApiServer: "https://10.0.0.1:6443", Token: "ABC123.S3CR3TFIRST00000"},
		"no token":     {ApiServer: "https://10.0.0.1:6443"},
	} {
		_, err := agent.KubeletBootstrapKubeconfig(b)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if _, secret, ok := strings.Cut(b.GetToken(), "."); ok && strings.Contains(strings.ToLower(err.Error()), strings.ToLower(secret)) {
			t.Errorf("%s: the error holds the secret: %v", name, err)
		}
	}
}

// kubeletRig is a hostRig whose bootstrap kubeconfig goes to a temporary
// root.
func kubeletRig(t *testing.T) (*hostRig, string) {
	rg := newHostRig(t, 0)
	path := filepath.Join(t.TempDir(), "etc", "kubernetes", "bootstrap-kubelet.conf")
	rg.host.KubeletBootstrapPath = path
	return rg, path
}

// desireBootstrap sends desired state gen (no Revision) with b and waits
// until the agent applied it.
func (rg *hostRig) desireBootstrap(t *testing.T, gen int64, b *roostv1.KubeletBootstrap) {
	t.Helper()
	rg.hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: &roostv1.DesiredState{Generation: gen, KubeletBootstrap: b}}})
	waitGeneration(t, rg, gen)
}

func waitGeneration(t *testing.T, rg *hostRig, gen int64) {
	t.Helper()
	// the status with the generation follows the file's write or removal
	var last int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if last = rg.hub.LastStatus().GetAppliedGeneration(); last >= gen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %d not applied (last %d)", gen, last)
		}
	}
}

func recordedDigest(t *testing.T, stateDir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, agent.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st agent.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st.KubeletBootstrapSHA256
}

func TestKubeletBootstrapFile(t *testing.T) {
	rg, path := kubeletRig(t)
	rg.start(t)

	// No token yet: no file.
	rg.desireBootstrap(t, 1, nil)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("bootstrap kubeconfig without a token: %v", err)
	}

	b1 := &roostv1.KubeletBootstrap{ApiServer: "https://10.0.0.1:6443", Token: bootToken1, ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}
	rg.desireBootstrap(t, 2, b1)
	want, _ := agent.KubeletBootstrapKubeconfig(b1)
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(want) {
		t.Fatalf("bootstrap kubeconfig %q (%v), want\n%s", got, err, want)
	}
	st1, _ := os.Stat(path)
	if st1.Mode().Perm() != 0o600 {
		t.Errorf("mode %o", st1.Mode().Perm())
	}
	if d := recordedDigest(t, rg.stateDir); len(d) != 64 {
		t.Errorf("state records digest %q", d)
	}
	if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}

	// The same token again (a reconnect, a new Revision): not rewritten.
	rg.desireBootstrap(t, 3, b1)
	if st, err := os.Stat(path); err != nil || !os.SameFile(st, st1) || !st.ModTime().Equal(st1.ModTime()) {
		t.Errorf("rewritten with the same content: %v", err)
	}

	// A new token: rewritten (a new file renamed over the old).
	b2 := &roostv1.KubeletBootstrap{ApiServer: "https://10.0.0.2:6443", Token: bootToken2}
	rg.desireBootstrap(t, 4, b2)
	want, _ = agent.KubeletBootstrapKubeconfig(b2)
	if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
		t.Fatalf("bootstrap kubeconfig after a new token %q (%v)", got, err)
	}
	// A token that is not one changes nothing.
	rg.desireBootstrap(t, 5, &roostv1.KubeletBootstrap{ApiServer: "https://10.0.0.2:6443", Token: "short.s3cr3tbad"})
	if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
		t.Fatalf("bootstrap kubeconfig after a bad token %q (%v)", got, err)
	}

	// The Node registered: the hub stops handing the token; the file goes.
	rg.desireBootstrap(t, 6, nil)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("bootstrap kubeconfig not removed: %v", err)
	}
	if d := recordedDigest(t, rg.stateDir); d != "" {
		t.Errorf("state still records %q", d)
	}

	// A file the agent did not write (or that changed since) is left alone.
	rg.desireBootstrap(t, 7, b1)
	if err := os.WriteFile(path, []byte("edited by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rg.desireBootstrap(t, 8, nil)
	if got, err := os.ReadFile(path); err != nil || string(got) != "edited by hand\n" {
		t.Errorf("foreign file %q (%v)", got, err)
	}
	os.Remove(path)
	if err := os.WriteFile(path, []byte("not the agent's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rg.desireBootstrap(t, 9, nil)
	if got, err := os.ReadFile(path); err != nil || string(got) != "not the agent's\n" {
		t.Errorf("foreign file %q (%v)", got, err)
	}

	// The log names token ids, never secrets.
	log := rg.r.log.String()
	for _, want := range []string{
		`msg="kubelet bootstrap kubeconfig written" path=` + path + ` api_server=https://10.0.0.1:6443 token_id=abc123 expires=`,
		`token_id=def456`,
		`msg="kubelet bootstrap kubeconfig removed`,
		`changed since the agent wrote it; left alone`,
		`kubelet bootstrap refused`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	for _, secret := range []string{"s3cr3tfirst00000", "s3cr3tsecond0000", "s3cr3tbad"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds secret %s:\n%s", secret, log)
		}
	}
}

// TestKubeletBootstrapAcrossRestarts: an agent that restarts still knows
// the file it wrote and removes it; after a reboot (/etc in RAM: the file
// is gone) it writes it again when the hub still hands the token.
func TestKubeletBootstrapAcrossRestarts(t *testing.T) {
	rg, path := kubeletRig(t)
	rg.start(t)
	b := &roostv1.KubeletBootstrap{ApiServer: "https://10.0.0.1:6443", Token: bootToken1}
	rg.desireBootstrap(t, 1, b)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}

	rg.restart(t)
	rg.desireBootstrap(t, 2, nil)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("bootstrap kubeconfig not removed after a restart: %v", err)
	}

	rg.desireBootstrap(t, 3, b)
	os.Remove(path) // a reboot
	rg.restart(t)
	rg.desireBootstrap(t, 4, b)
	want, _ := agent.KubeletBootstrapKubeconfig(b)
	if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
		t.Fatalf("bootstrap kubeconfig after a reboot %q (%v)", got, err)
	}
}

// restart stops the agent and starts another on the same state dir.
func (rg *hostRig) restart(t *testing.T) {
	t.Helper()
	if err := rg.r.halt(t); err != nil {
		t.Fatal(err)
	}
	hellos, _, _, _, _, _ := rg.hub.Snapshot()
	id, _ := simServer(20)
	inv := &agent.FakeInventory{Inv: &roostv1.Inventory{Firmware: "UEFI", Arch: "amd64"}}
	rg.r = startAgent(t, agent.Options{Hubs: []string{rg.hub.Addr}, CA: rg.caPEM, Version: "v-test",
		Store: agent.FileStore{Dir: rg.stateDir}, Identity: id, Inventory: inv, Clock: rg.clock, Host: rg.host})
	fakehub.Eventually(t, "reconnect", func() bool { h, _, _, _, _, _ := rg.hub.Snapshot(); return len(h) > len(hellos) })
}
