// Command kubecluster runs a real Kubernetes control plane on this machine
// for `make demo`: etcd, kube-apiserver and kube-controller-manager from
// `make testbin`, set up as kubetest.WithNodes sets them up for the e2e
// tests (one cluster CA; bootstrap tokens; CSR approval and signing), so a
// QEMU guest's kubelet can join it through 10.0.2.2.
//
//	kubecluster serve -dir DIR [-node-ip 10.0.2.2]
//	    starts the control plane and writes DIR/admin.kubeconfig (admin
//	    credentials, the form roostctl cluster set-credentials takes),
//	    DIR/ca.crt (the cluster CA, PEM) and DIR/url (https://127.0.0.1:PORT),
//	    then serves until SIGINT or SIGTERM.
//	kubecluster wait-node -kubeconfig FILE -node NAME [-timeout 20m]
//	    prints "Node NAME registered" and "Node NAME Ready" as they happen;
//	    exits 0 once Ready, 1 on timeout.
//
// It is a development tool, not part of Roost.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/roostfleet/roost/hub/kube/kubetest"
)

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("kubecluster: ")
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "wait-node":
		waitNode(os.Args[2:])
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kubecluster serve -dir DIR [-node-ip IP] | kubecluster wait-node -kubeconfig FILE -node NAME [-timeout D]")
	os.Exit(2)
}

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	dir := fs.String("dir", "", "folder for admin.kubeconfig, ca.crt, url and the control plane's data (required)")
	nodeIP := fs.String("node-ip", "10.0.2.2", "address the kubelets reach the API server at (in its serving certificate)")
	_ = fs.Parse(args)
	ip := net.ParseIP(*nodeIP)
	if *dir == "" || ip == nil {
		fs.Usage()
		os.Exit(2)
	}
	r := &runner{dir: *dir}
	env := kubetest.Start(r, kubetest.WithNodes(ip))
	for name, data := range map[string][]byte{"admin.kubeconfig": env.Kubeconfig, "ca.crt": env.CAPEM, "url": []byte(env.URL + "\n")} {
		if err := os.WriteFile(filepath.Join(*dir, name), data, 0o600); err != nil {
			r.Fatalf("%v", err)
		}
	}
	log.Printf("serving at %s; admin kubeconfig %s", env.URL, filepath.Join(*dir, "admin.kubeconfig"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	r.cleanup()
}

func waitNode(args []string) {
	fs := flag.NewFlagSet("wait-node", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig (required)")
	node := fs.String("node", "", "Node name (required)")
	timeout := fs.Duration("timeout", 20*time.Minute, "how long to wait")
	_ = fs.Parse(args)
	if *kubeconfig == "" || *node == "" {
		fs.Usage()
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start, registered := time.Now(), false
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, *node, metav1.GetOptions{})
		switch {
		case err == nil && !registered:
			registered = true
			fmt.Printf("Node %s registered (%s)\n", *node, time.Since(start).Round(time.Second))
		case err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.DeadlineExceeded):
			log.Printf("reading Node %s: %v", *node, err)
		}
		if err == nil && ready(n) {
			fmt.Printf("Node %s Ready (%s): kubelet %s, container runtime %s\n", *node, time.Since(start).Round(time.Second),
				n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion)
			return
		}
		select {
		case <-ctx.Done():
			log.Fatalf("Node %s not Ready after %s", *node, *timeout)
		case <-time.After(2 * time.Second):
		}
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// runner is the kubetest.T of a program: its log goes to stderr, Fatalf
// runs the cleanups and exits 1, temporary folders live under dir.
type runner struct {
	dir      string
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	tmp      int
}

func (r *runner) Helper()                         {}
func (r *runner) Logf(format string, args ...any) { log.Printf(format, args...) }
func (r *runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	log.Printf(format, args...)
}
func (r *runner) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.cleanup()
	os.Exit(1)
}
func (r *runner) Skip(args ...any)                 { r.Fatal(args...) }
func (r *runner) Skipf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// TempDir makes a new folder under dir (kubetest keeps certificates and
// kubeconfigs there).
func (r *runner) TempDir() string {
	r.mu.Lock()
	r.tmp++
	d := filepath.Join(r.dir, fmt.Sprintf("tmp%d", r.tmp))
	r.mu.Unlock()
	if err := os.MkdirAll(d, 0o700); err != nil {
		log.Fatal(err)
	}
	return d
}

// cleanup runs the cleanups, last registered first, once.
func (r *runner) cleanup() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
