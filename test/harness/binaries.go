// Package harness runs real roost-hub processes, and roostctl against them,
// on 127.0.0.1 for the process-level tests under test/, and in-process hub
// clusters for the Raft-level ones.
//
// Binaries come from $ROOST_BIN (what `make test-root` and `make bench` set
// after `make build`); without it they are built once per test binary with
// `go build` into a temporary directory that Main removes.
//
// Every member gets free loopback ports, a data dir and a log file (its
// stdout and stderr) in t.TempDir(); when a test fails, the tail of each
// member's log is printed. Every wait is bounded.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// EnvBin names the environment variable holding the directory with the
// roost-hub and roostctl binaries.
const EnvBin = "ROOST_BIN"

var (
	buildOnce sync.Once
	buildDir  string // made by us, removed by Main
	hubBin    string
	ctlBin    string
	hubErr    error
	ctlErr    error
)

// Main runs a test package's tests and removes the binaries the harness
// built, if any. Use it from TestMain: func TestMain(m *testing.M) { harness.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// HubBinary returns the path of roost-hub, failing the test when it can be
// neither found nor built.
func HubBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(findBinaries)
	if hubErr != nil {
		t.Fatalf("roost-hub binary: %v", hubErr)
	}
	return hubBin
}

// CtlBinary returns the path of roostctl, skipping the test (with a message
// naming what is missing) when it can be neither found nor built.
func CtlBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(findBinaries)
	if ctlErr != nil {
		t.Skipf("roostctl is missing, so this test cannot run: %v", ctlErr)
	}
	return ctlBin
}

func findBinaries() {
	if dir := os.Getenv(EnvBin); dir != "" {
		hubBin, hubErr = existing(filepath.Join(dir, "roost-hub"))
		ctlBin, ctlErr = existing(filepath.Join(dir, "roostctl"))
		return
	}
	root, err := moduleRoot()
	if err != nil {
		hubErr, ctlErr = err, err
		return
	}
	buildDir, err = os.MkdirTemp("", "roost-test-bin-")
	if err != nil {
		hubErr, ctlErr = err, err
		return
	}
	hubBin = filepath.Join(buildDir, "roost-hub")
	ctlBin = filepath.Join(buildDir, "roostctl")
	hubErr = goBuild(root, "./cmd/roost-hub", hubBin)
	ctlErr = goBuild(root, "./cmd/roostctl", ctlBin)
}

func existing(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("$%s: %w (run `make build`)", EnvBin, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("$%s: %s is not an executable file", EnvBin, path)
	}
	return path, nil
}

func goBuild(root, pkg, out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory; set $%s", EnvBin)
		}
		dir = parent
	}
}

// RepoFile returns the absolute path of a file in the repository (e.g.
// "examples/all.yaml").
func RepoFile(t testing.TB, rel string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}
