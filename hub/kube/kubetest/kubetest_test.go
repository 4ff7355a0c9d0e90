package kubetest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPinnedVersions(t *testing.T) {
	p := filepath.Join(t.TempDir(), "go.mod")
	err := os.WriteFile(p, []byte(`module x

require go.etcd.io/etcd/server/v3 v3.6.4

require (
	go.etcd.io/etcd/client/v3 v3.6.4 // indirect
	k8s.io/kubernetes v1.34.4
)
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	kube, etcd, err := pinnedVersions(p)
	if err != nil || kube != "v1.34.4" || etcd != "v3.6.4" {
		t.Fatalf("pinnedVersions = %q, %q, %v", kube, etcd, err)
	}
}

// BinDir is where hack/testbin/build.sh puts the binaries by default.
func TestBinDir(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("ROOST_TESTBIN_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	kube, etcd, err := pinnedVersions("../../../hack/testbin/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	got, err := BinDir()
	if want := "/cache/roost/testbin/kubernetes-" + kube + "-etcd-" + etcd; err != nil || got != want {
		t.Fatalf("BinDir = %q, %v; want %q", got, err, want)
	}
	t.Setenv("ROOST_TESTBIN_DIR", "/elsewhere")
	if got, _ := BinDir(); got != "/elsewhere" {
		t.Fatalf("BinDir with ROOST_TESTBIN_DIR = %q", got)
	}
	t.Setenv("KUBEBUILDER_ASSETS", "/assets")
	if got, _ := BinDir(); got != "/assets" {
		t.Fatalf("BinDir with KUBEBUILDER_ASSETS = %q", got)
	}
}
