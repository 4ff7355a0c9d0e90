package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const testToken = "sekret-token-0123456789abcdef"

// laptopKubeconfig is a kubeconfig as found on an operator's machine: two
// contexts, certificate files next to it, a token in a file.
func laptopKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "roost-hub"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, dir, "pki/hub.crt", certPEM)
	writeFile(t, dir, "pki/hub.key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})))
	writeFile(t, dir, "pki/ca.crt", certPEM)
	writeFile(t, dir, "token", testToken+"\n")
	return writeFile(t, dir, "config", `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority: pki/ca.crt
- name: dev
  cluster:
    server: https://10.0.0.2:6443
    certificate-authority: /does/not/exist/ca.crt
contexts:
- name: hub@prod
  context: {cluster: prod, user: hub}
- name: sa@prod
  context: {cluster: prod, user: sa}
- name: me@dev
  context: {cluster: dev, user: me}
current-context: me@dev
users:
- name: hub
  user:
    client-certificate: pki/hub.crt
    client-key: pki/hub.key
- name: sa
  user:
    tokenFile: token
- name: me
  user:
    client-certificate: /does/not/exist/me.crt
    client-key: /does/not/exist/me.key
`)
}

func prodCluster() *roostv1.Object {
	return resource.Wrap(&roostv1.Cluster{ApiVersion: resource.APIVersion, Kind: "Cluster",
		Metadata: &roostv1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"a": "b"},
			Uid: "u-1", Generation: 3, CreateIndex: 2, ModifyIndex: 9},
		Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.4",
			Join: &roostv1.ClusterJoin{ClusterDns: []string{"10.96.0.10"}}, DrainTimeout: durationpb.New(7 * time.Minute)},
		Status: &roostv1.ClusterStatus{CredentialsSet: false, Nodes: 2}})
}

func TestClusterSetCredentials(t *testing.T) {
	f := newFakeHub()
	f.put(prodCluster())
	config, _ := startFakeHub(t, f)
	dir := t.TempDir()
	kc := laptopKubeconfig(t, dir)

	r := runCLI(t, "", "--config", config, "cluster", "set-credentials", "prod", "--kubeconfig", kc, "--context", "hub@prod")
	if r.code != ExitOK || r.out != "cluster/prod credentials set\n" || r.err != "" {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	if len(f.applies) != 1 || len(f.applies[0].GetObjects()) != 1 || f.applies[0].GetDryRun() {
		t.Fatalf("applies: %v", f.applies)
	}
	got := f.applies[0].GetObjects()[0].GetCluster()
	// The rest of the Cluster is kept; status and hub-set metadata are not
	// sent, but for the preconditions: the uid and modifyIndex read.
	want := prodCluster().GetCluster()
	if got.GetSpec().GetApiEndpoint() != want.GetSpec().GetApiEndpoint() || got.GetSpec().GetDrainTimeout().AsDuration() != 7*time.Minute ||
		got.GetSpec().GetJoin().GetClusterDns()[0] != "10.96.0.10" || got.GetMetadata().GetLabels()["env"] != "prod" ||
		got.GetMetadata().GetAnnotations()["a"] != "b" {
		t.Errorf("the apply lost parts of the Cluster: %v", got)
	}
	if got.GetStatus() != nil || got.GetMetadata().GetGeneration() != 0 || got.GetMetadata().GetCreateIndex() != 0 {
		t.Errorf("the apply holds hub-set fields: %v", got)
	}
	if got.GetMetadata().GetUid() != "u-1" || got.GetMetadata().GetModifyIndex() != 9 {
		t.Errorf("the apply does not carry the uid and modifyIndex read as preconditions: %v", got.GetMetadata())
	}
	// One context, its files inlined, valid.
	kubeconfig := got.GetSpec().GetKubeconfig()
	if vs := resource.CheckKubeconfig([]byte(kubeconfig)); len(vs) > 0 {
		t.Fatalf("stored kubeconfig has problems: %v\n%s", vs, kubeconfig)
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "hub@prod" || len(cfg.Contexts) != 1 || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
		t.Errorf("not reduced to one context:\n%s", kubeconfig)
	}
	if u := cfg.AuthInfos["hub"]; u == nil || len(u.ClientCertificateData) == 0 || len(u.ClientKeyData) == 0 || u.ClientCertificate != "" {
		t.Errorf("certificate files not inlined:\n%s", kubeconfig)
	}
	if c := cfg.Clusters["prod"]; c == nil || len(c.CertificateAuthorityData) == 0 || c.CertificateAuthority != "" {
		t.Errorf("CA file not inlined:\n%s", kubeconfig)
	}
	// The Cluster as the fake hub now holds it never prints the kubeconfig.
	for _, format := range []string{"yaml", "json", "wide"} {
		r := runCLI(t, "", "--config", config, "get", "cluster", "prod", "-o", format)
		if r.code != 0 || strings.Contains(r.out, "kubeconfig") || strings.Contains(r.out, "BEGIN") {
			t.Errorf("get -o %s (exit %d) shows the kubeconfig:\n%s", format, r.code, r.out)
		}
	}
	r = runCLI(t, "", "--config", config, "describe", "cluster", "prod")
	if r.code != 0 || !strings.Contains(r.out, "Kubeconfig:") || !strings.Contains(r.out, "<redacted>") || strings.Contains(r.out, "BEGIN") {
		t.Errorf("describe (exit %d):\n%s", r.code, r.out)
	}

	// The token file of another context, from standard input: relative
	// names are relative to the working directory then, so give the
	// kubeconfig with an absolute tokenFile.
	stdin := strings.Replace(strings.Replace(mustRead(t, kc), "tokenFile: token", "tokenFile: "+filepath.Join(dir, "token"), 1),
		"current-context: me@dev", "current-context: sa@prod", 1)
	stdin = strings.Replace(stdin, "certificate-authority: pki/ca.crt", "insecure-skip-tls-verify: true", 1)
	r = runCLI(t, stdin, "--config", config, "cluster", "set-credentials", "cluster/prod", "--kubeconfig", "-", "--dry-run")
	if r.code != ExitOK || r.out != "cluster/prod credentials set (dry run)\n" {
		t.Fatalf("stdin: exit %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	last := f.applies[len(f.applies)-1]
	if !last.GetDryRun() {
		t.Error("--dry-run not sent")
	}
	cfg, err = clientcmd.Load([]byte(last.GetObjects()[0].GetCluster().GetSpec().GetKubeconfig()))
	if err != nil {
		t.Fatal(err)
	}
	if u := cfg.AuthInfos["sa"]; u == nil || u.Token != testToken || u.TokenFile != "" {
		t.Errorf("tokenFile not inlined: %+v", u)
	}

	// Applying the same credentials again is reported as such.
	r = runCLI(t, "", "--config", config, "cluster", "set-credentials", "prod", "--kubeconfig", kc, "--context", "hub@prod")
	if r.code != ExitOK || r.out != "cluster/prod credentials unchanged\n" {
		t.Errorf("again: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestClusterSetCredentialsBadInput(t *testing.T) {
	f := newFakeHub()
	f.put(prodCluster())
	config, _ := startFakeHub(t, f)
	dir := t.TempDir()
	kc := laptopKubeconfig(t, dir)
	noCurrent := writeFile(t, dir, "nocurrent", strings.Replace(mustRead(t, kc), "current-context: me@dev\n", "", 1))
	noCreds := writeFile(t, dir, "nocreds", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://h:6443'}\n"+
		"contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {}\n")
	notYAML := writeFile(t, dir, "garbage", "token: "+testToken+": oops\n")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  []string
	}{
		{"no kubeconfig flag", "", []string{"prod"}, []string{`required flag(s) "kubeconfig" not set`}},
		{"no name", "", []string{"--kubeconfig", kc}, []string{"needs a cluster NAME"}},
		{"empty name", "", []string{"", "--kubeconfig", kc}, []string{"argument 1 is empty"}},
		{"invalid name", "", []string{"Prod_1", "--kubeconfig", kc}, []string{`the cluster NAME "Prod_1" cannot name an object: a lowercase RFC 1123 label`}},
		{"kind prefix only", "", []string{"cluster/", "--kubeconfig", kc}, []string{`the cluster NAME "cluster/" cannot name an object`}},
		{"empty kubeconfig flag", "", []string{"prod", "--kubeconfig", ""}, []string{"--kubeconfig: empty file name; give the kubeconfig FILE, or - for standard input"}},
		{"empty kubeconfig flag with =", "", []string{"prod", "--kubeconfig="}, []string{"--kubeconfig: empty file name"}},
		{"missing file", "", []string{"prod", "--kubeconfig", filepath.Join(dir, "nope")}, []string{"--kubeconfig: " + filepath.Join(dir, "nope") + ": no such file"}},
		{"current context's files missing", "", []string{"prod", "--kubeconfig", kc},
			[]string{`context "me@dev": inlining its files: /does/not/exist/`}},
		{"unknown context", "", []string{"prod", "--kubeconfig", kc, "--context", "admin"},
			[]string{`has no context "admin"; its contexts: "hub@prod", "me@dev", "sa@prod"`}},
		{"no current context", "", []string{"prod", "--kubeconfig", noCurrent},
			[]string{`has no current-context; choose one with --context: "hub@prod", "me@dev", "sa@prod"`}},
		{"no credentials", "", []string{"prod", "--kubeconfig", noCreds}, []string{`(context "x"): user "u" has no credentials`}},
		{"not yaml", "", []string{"prod", "--kubeconfig", notYAML}, []string{"does not parse as a kubeconfig"}},
		{"empty stdin", "", []string{"prod", "--kubeconfig", "-"}, []string{"--kubeconfig <stdin>: holds no context"}},
		{"context names an undefined cluster", "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: 'https://h'}\n" +
			"contexts:\n- name: x\n  context: {cluster: b, user: u}\ncurrent-context: x\n", []string{"prod", "--kubeconfig", "-"},
			[]string{`--kubeconfig <stdin>: context "x" names cluster "b", which it does not define; its clusters: "a"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.stdin, append([]string{"--config", config, "cluster", "set-credentials"}, tc.args...)...)
			if r.code != ExitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", r.code, r.err)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.err, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.err)
				}
			}
			if strings.Contains(r.err, testToken) || strings.Contains(r.err, "PRIVATE KEY") {
				t.Errorf("stderr repeats a secret:\n%s", r.err)
			}
			if r.out != "" {
				t.Errorf("stdout: %q", r.out)
			}
		})
	}
	if len(f.applies) != 0 || len(f.gets) != 0 {
		t.Errorf("bad input reached the hub: %d applies, %d gets", len(f.applies), len(f.gets))
	}
}

// TestClusterSetCredentialsConflict checks that set-credentials reads the
// Cluster again when the hub refuses its apply because the Cluster changed
// since it was read (Aborted), and gives up after setCredentialsAttempts.
func TestClusterSetCredentialsConflict(t *testing.T) {
	f := newFakeHub()
	f.put(prodCluster())
	config, _ := startFakeHub(t, f)
	kc := laptopKubeconfig(t, t.TempDir())
	args := []string{"--config", config, "cluster", "set-credentials", "prod", "--kubeconfig", kc, "--context", "sa@prod"}

	f.conflicts = setCredentialsAttempts - 1
	r := runCLI(t, "", args...)
	if r.code != ExitOK || r.out != "cluster/prod credentials set\n" || r.err != "" {
		t.Fatalf("after %d conflicts: exit %d\nstdout %q\nstderr %q", setCredentialsAttempts-1, r.code, r.out, r.err)
	}
	if len(f.gets) != setCredentialsAttempts || len(f.applies) != setCredentialsAttempts {
		t.Errorf("%d gets and %d applies, want %d of each (read again after each conflict)", len(f.gets), len(f.applies), setCredentialsAttempts)
	}

	f.gets, f.applies = nil, nil
	f.conflicts = setCredentialsAttempts
	r = runCLI(t, "", args...)
	want := "Error from hub: cluster/prod: modified since it was read (modifyIndex 9, now 106)\n" +
		"  the Cluster changed each time its credentials were about to be stored (3 attempts); nothing was stored: run the command again\n"
	if r.code != ExitFailed || r.out != "" || r.err != want {
		t.Errorf("after %d conflicts: exit %d\nstdout %q\nstderr %q\nwant   %q", setCredentialsAttempts, r.code, r.out, r.err, want)
	}
	if len(f.applies) != setCredentialsAttempts {
		t.Errorf("%d applies, want %d", len(f.applies), setCredentialsAttempts)
	}
}

func TestClusterSetCredentialsHubErrors(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	kc := laptopKubeconfig(t, t.TempDir())
	args := []string{"--config", config, "cluster", "set-credentials", "prod", "--kubeconfig", kc, "--context", "sa@prod"}

	r := runCLI(t, "", args...)
	if r.code != ExitFailed || !strings.Contains(r.err, `Error from hub: Cluster "prod" not found`) ||
		!strings.Contains(r.err, "create it first (roostctl apply -f cluster.yaml)") {
		t.Errorf("missing cluster: exit %d, stderr:\n%s", r.code, r.err)
	}
	if len(f.applies) != 0 {
		t.Error("a missing Cluster must not be created by set-credentials")
	}

	f.put(prodCluster())
	f.applyErr = apierror.Invalid("invalid objects", apierror.Violation{Field: "objects[0].spec.kubeconfig", Message: "is refused", Hint: "try again"})
	r = runCLI(t, "", args...)
	if r.code != ExitUsage || !strings.Contains(r.err, "Error from hub: cluster/prod: invalid objects\n  spec.kubeconfig: is refused (try again)\n") {
		t.Errorf("refused: exit %d, stderr:\n%s", r.code, r.err)
	}

	r = runCLI(t, "", "--hub", closedAddr(t), "--timeout", "2s", "--config", config, "cluster", "set-credentials", "prod", "--kubeconfig", kc, "--context", "sa@prod")
	if r.code != ExitUnreachable {
		t.Errorf("unreachable: exit %d, stderr:\n%s", r.code, r.err)
	}
}

func TestClusterSetCredentialsRefusesExec(t *testing.T) {
	f := newFakeHub()
	f.put(prodCluster())
	config, _ := startFakeHub(t, f)
	kc := writeFile(t, t.TempDir(), "eks", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://x.eks.amazonaws.com"}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: [eks, get-token]}
`)
	r := runCLI(t, "", "--config", config, "cluster", "set-credentials", "prod", "--kubeconfig", kc)
	if r.code != 2 || !strings.Contains(r.err, `user "u" uses an exec credential plugin, which would run a command on every hub member`) {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.err)
	}
}

// TestClusterCredentialsRealHub stores credentials through a real hub and
// checks that they are write-only end to end: set, never read back,
// kept by an apply without them.
func TestClusterCredentialsRealHub(t *testing.T) {
	h := startRealHub(t, t.TempDir(), freeAddr(t), freeAddr(t))
	defer h.Close()
	config := h.AdminConfigPath()
	run := func(stdin string, args ...string) result {
		t.Helper()
		return runCLI(t, stdin, append([]string{"--config", config}, args...)...)
	}
	dir := t.TempDir()
	manifest := writeFile(t, dir, "cluster.yaml", clusterYAML)
	if r := run("", "apply", "-f", manifest); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.err)
	}
	kc := laptopKubeconfig(t, dir)
	if r := run("", "cluster", "set-credentials", "prod", "--kubeconfig", kc, "--context", "sa@prod"); r.code != 0 || r.out != "cluster/prod credentials set\n" {
		t.Fatalf("set-credentials: %d\n%s%s", r.code, r.out, r.err)
	}
	check := func(when string) {
		t.Helper()
		r := run("", "get", "cluster", "prod", "-o", "yaml")
		if r.code != 0 || strings.Contains(r.out, "kubeconfig") || strings.Contains(r.out, testToken) || !strings.Contains(r.out, "credentialsSet: true") {
			t.Errorf("%s: get -o yaml (exit %d):\n%s%s", when, r.code, r.out, r.err)
		}
		r = run("", "get", "clusters", "-o", "wide")
		if r.code != 0 || !strings.Contains(r.out, "<set>") {
			t.Errorf("%s: get -o wide (exit %d):\n%s%s", when, r.code, r.out, r.err)
		}
	}
	check("after set-credentials")
	if r := run("", "apply", "-f", manifest); r.code != 0 || r.out != "cluster/prod unchanged\n" {
		t.Errorf("re-apply without kubeconfig: %d\n%s%s", r.code, r.out, r.err)
	}
	check("after an apply without kubeconfig")
}
