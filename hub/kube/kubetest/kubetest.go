// Package kubetest runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver through controller-runtime's envtest, and optionally
// kube-controller-manager with only the disruption controller. There is no
// kubelet and no scheduler: pods stay Pending until a test writes their
// status, and nothing finishes the deletion of a terminating pod.
//
// The binaries are built by `make testbin` (hack/testbin/build.sh) into a
// cache folder; Start finds them through KUBEBUILDER_ASSETS or that same
// folder. Start never builds them: without them a test is skipped, or fails
// when the environment variable CI or KUBEBUILDER_ASSETS is set. Under
// `go test -short` Start skips, so the unit tier starts no processes.
package kubetest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Env is a running control plane, stopped when the test ends.
type Env struct {
	// Config authenticates as an admin (group system:masters) with a
	// client certificate; QPS and Burst are raised for tests.
	Config *rest.Config
	// Kubeconfig is the same admin credentials as kubeconfig YAML, the form
	// the hub takes a cluster's credentials in.
	Kubeconfig []byte
	// URL is the API server's address, "https://127.0.0.1:<port>".
	URL string
	// CAPEM is the PEM CA certificate the API server's serving certificate
	// is signed by (with WithNodes, the cluster CA).
	CAPEM []byte
	// BinDir is the folder the control-plane binaries ran from.
	BinDir string

	t       T
	env     *envtest.Environment
	stopKCM func() // stops kube-controller-manager if it runs; idempotent
}

type options struct {
	disruption bool
	nodes      bool
	nodeIPs    []net.IP
}

// T is what Start needs of its caller: a testing.TB is one; a program
// that runs a control plane outside go test (hack/kubecluster, for the
// demo) gives its own, whose Fatalf stops the program after the cleanups.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Skip(args ...any)
	Failed() bool
	Cleanup(func())
	TempDir() string
}

// Option configures Start.
type Option func(*options)

// WithDisruptionController also runs kube-controller-manager with only the
// disruption controller, which keeps PodDisruptionBudget status up to date
// (without it the Eviction API refuses every eviction a budget covers, as
// "still being processed"). The controller syncs within a second or two of
// Start returning: poll for the status it writes.
func WithDisruptionController() Option { return func(o *options) { o.disruption = true } }

// WithNodes makes the control plane one that real kubelets join, as
// kubeadm sets one up: a single cluster CA signs the API server's serving
// certificate (valid for localhost, 127.0.0.1 and ips, such as QEMU's
// 10.0.2.2 for a guest's kubelet), authenticates client certificates and
// signs the kubelets' certificates; kube-controller-manager runs with
// every default controller (CSR approving and signing, service accounts,
// the root CA ConfigMap, disruption, node lifecycle) and the bootstrap
// token cleaner. Env.CAPEM is that CA.
func WithNodes(ips ...net.IP) Option {
	return func(o *options) { o.nodes, o.nodeIPs = true, append(o.nodeIPs, ips...) }
}

var quietLogs sync.Once

// Start runs etcd and kube-apiserver (with bootstrap token authentication,
// authorization Node,RBAC and admission NodeRestriction, as kubeadm
// configures them) and returns once the API server serves. It skips the
// test under -short or when the binaries are missing (fails instead when
// CI or KUBEBUILDER_ASSETS is set). The control plane stops when the test
// ends.
func Start(t T, opts ...Option) *Env {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if _, inTest := t.(testing.TB); inTest && testing.Short() {
		t.Skip("kubetest: starts kube-apiserver and etcd; skipped under -short")
	}
	bins := []string{"kube-apiserver", "etcd"}
	if o.disruption || o.nodes {
		bins = append(bins, "kube-controller-manager")
	}
	dir, err := findBinaries(bins...)
	if err != nil {
		// Skipping is for a developer's inner loop only: in CI, or when
		// pointed at binaries (make test-kube), missing ones fail.
		if os.Getenv("CI") != "" || os.Getenv("KUBEBUILDER_ASSETS") != "" {
			t.Fatalf("kubetest: %v (run make testbin)", err)
		}
		t.Skipf("kubetest: %v (run make testbin)", err)
	}
	quietLogs.Do(func() { ctrllog.SetLogger(logr.Discard()) })

	logs := &tailBuffer{max: 64 << 10}
	begin := time.Now()
	te := &envtest.Environment{BinaryAssetsDirectory: dir}
	api := te.ControlPlane.GetAPIServer()
	api.Out, api.Err = logs, logs
	var ca *clusterCA
	if o.nodes {
		ca, err = newClusterCA(t.TempDir(), o.nodeIPs)
		if err != nil {
			t.Fatalf("kubetest: cluster CA: %v", err)
		}
		api.CertDir, api.SecureServing.CA, api.Authn = ca.dir, ca.certPEM, caAuthn{ca}
	}
	args := api.Configure()
	args.Set("enable-bootstrap-token-auth", "true")
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("kubetest: starting etcd and kube-apiserver from %s: %v\n%s", dir, err, logs)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubetest: kube-apiserver log (tail):\n%s", logs)
		}
		if err := te.Stop(); err != nil {
			t.Errorf("kubetest: stopping the control plane: %v", err)
		}
	})
	kubeconfig, err := envtestKubeconfig(te, "kubetest-admin", "system:masters")
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	e := &Env{
		Config:     cfg,
		Kubeconfig: kubeconfig,
		URL:        strings.TrimSuffix(cfg.Host, "/"),
		CAPEM:      cfg.CAData,
		BinDir:     dir,
		t:          t,
		env:        te,
	}
	t.Logf("kubetest: etcd and kube-apiserver up in %v (%s)", time.Since(begin).Round(time.Millisecond), e.URL)
	switch {
	case o.nodes:
		begin := time.Now()
		e.startControllerManager(dir,
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--cluster-signing-cert-file="+ca.path(caCertFile),
			"--cluster-signing-key-file="+ca.path(caKeyFile),
			"--root-ca-file="+ca.path(caCertFile),
			"--service-account-private-key-file="+ca.path(saKeyFile),
			"--use-service-account-credentials=false",
		)
		t.Logf("kubetest: kube-controller-manager (all controllers, signing with the cluster CA) started in %v", time.Since(begin).Round(time.Millisecond))
	case o.disruption:
		begin := time.Now()
		e.startControllerManager(dir, "--controllers=disruption-controller")
		t.Logf("kubetest: kube-controller-manager (disruption-controller) started in %v", time.Since(begin).Round(time.Millisecond))
	}
	return e
}

func envtestKubeconfig(te *envtest.Environment, name string, groups ...string) ([]byte, error) {
	u, err := te.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of user %s: %w", name, err)
	}
	return kc, nil
}

// AddUser provisions a user authenticated by a client certificate, in the
// given groups, and returns its kubeconfig YAML. No RBAC is granted.
func (e *Env) AddUser(name string, groups ...string) []byte {
	e.t.Helper()
	kc, err := envtestKubeconfig(e.env, name, groups...)
	if err != nil {
		e.t.Fatalf("kubetest: %v", err)
	}
	return kc
}

// Clientset is a client-go clientset for the admin Config.
func (e *Env) Clientset() kubernetes.Interface {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		e.t.Fatalf("kubetest: clientset: %v", err)
	}
	return cs
}

// StopAPIServer stops kube-apiserver (etcd keeps running), for tests of a
// cluster whose API is down, and kube-controller-manager first if it runs.
// It cannot be restarted.
func (e *Env) StopAPIServer() {
	e.t.Helper()
	begin := time.Now()
	if e.stopKCM != nil {
		e.stopKCM()
	}
	if err := e.env.ControlPlane.APIServer.Stop(); err != nil {
		e.t.Fatalf("kubetest: stopping kube-apiserver: %v", err)
	}
	e.t.Logf("kubetest: kube-apiserver stopped in %v", time.Since(begin).Round(time.Millisecond))
}

// startControllerManager runs kube-controller-manager with args (which
// controllers, signing keys) as an admin, until the test ends.
func (e *Env) startControllerManager(dir string, args ...string) {
	t := e.t
	kubeconfig := filepath.Join(t.TempDir(), "kube-controller-manager.kubeconfig")
	kc, err := envtestKubeconfig(e.env, "system:kube-controller-manager", "system:masters")
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &tailBuffer{max: 64 << 10}
	cmd := exec.Command(filepath.Join(dir, "kube-controller-manager"), append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubetest: starting kube-controller-manager: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	e.stopKCM = func() {
		once.Do(func() {
			select {
			case err := <-exited:
				t.Errorf("kubetest: kube-controller-manager exited early: %v\n%s", err, logs)
				return
			default:
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("kubetest: kube-controller-manager log (tail):\n%s", logs)
			}
		})
	}
	t.Cleanup(e.stopKCM)
}

// BinDir is the folder the control-plane binaries are looked up in:
// $KUBEBUILDER_ASSETS when set, else the folder hack/testbin/build.sh
// builds into: $ROOST_TESTBIN_DIR, or
// ${XDG_CACHE_HOME:-$HOME/.cache}/roost/testbin/kubernetes-<v>-etcd-<v> with
// the versions pinned in hack/testbin/go.mod (found from the working
// directory upwards).
func BinDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	if d := os.Getenv("ROOST_TESTBIN_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	var gomod string
	for d := wd; ; d = filepath.Dir(d) {
		if p := filepath.Join(d, "hack", "testbin", "go.mod"); fileExists(p) {
			gomod = p
			break
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no hack/testbin/go.mod above %s", wd)
		}
	}
	kube, etcd, err := pinnedVersions(gomod)
	if err != nil {
		return "", err
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "roost", "testbin", "kubernetes-"+kube+"-etcd-"+etcd), nil
}

// pinnedVersions reads the k8s.io/kubernetes and etcd server versions from
// the tools module's go.mod, as build.sh does.
func pinnedVersions(gomod string) (kube, etcd string, err error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "require" {
			f = f[1:]
		}
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "k8s.io/kubernetes":
			kube = f[1]
		case "go.etcd.io/etcd/server/v3":
			etcd = f[1]
		}
	}
	if kube == "" || etcd == "" {
		return "", "", fmt.Errorf("%s pins no k8s.io/kubernetes or go.etcd.io/etcd/server/v3", gomod)
	}
	return kube, etcd, nil
}

func findBinaries(names ...string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", fmt.Errorf("locating the control-plane binaries: %w", err)
	}
	var missing []string
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s missing in %s", strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// writers.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

var _ io.Writer = (*tailBuffer)(nil)

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
