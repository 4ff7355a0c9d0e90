package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roostfleet/roost/client"
)

// Timeouts of the harness's waits.
const (
	// HealthyTimeout bounds waiting for /healthz to answer 200.
	HealthyTimeout = 30 * time.Second
	// StopTimeout bounds waiting for a signalled process to exit; after it
	// the process is killed and the stop reported as failed.
	StopTimeout = 20 * time.Second
)

var (
	portsMu sync.Mutex
	ports   = map[string]bool{}
)

// FreeAddr returns a free 127.0.0.1:PORT, never the same one twice in a test
// binary. (The port is free when returned; a process that binds it later
// may race another, which on a test machine is rare.)
func FreeAddr(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		addr := l.Addr().String()
		l.Close()
		if !ports[addr] {
			ports[addr] = true
			return addr
		}
	}
	t.Fatal("free port: no new port in 100 tries")
	return ""
}

// MemberOptions describe a roost-hub process.
type MemberOptions struct {
	// NodeID is --node-id, also the member's name in logs; required.
	NodeID string
	// Join and JoinToken make the member join an existing cluster.
	Join, JoinToken string
	// LogStore is --raft-log-store; empty keeps the default.
	LogStore string
	// Args are extra flags.
	Args []string
}

// Member is one roost-hub process: its flags stay the same across restarts.
type Member struct {
	t                           testing.TB
	NodeID                      string
	DataDir                     string
	APIAddr, RaftAddr, HTTPAddr string
	LogPath                     string
	args                        []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	waitErr error
	starts  int
}

// NewMember prepares a member (ports, data dir, log file) without starting it.
func NewMember(t testing.TB, o MemberOptions) *Member {
	t.Helper()
	if o.NodeID == "" {
		t.Fatal("harness: MemberOptions.NodeID is required")
	}
	m := &Member{
		t: t, NodeID: o.NodeID, DataDir: filepath.Join(t.TempDir(), o.NodeID),
		APIAddr: FreeAddr(t), RaftAddr: FreeAddr(t), HTTPAddr: FreeAddr(t),
	}
	m.LogPath = m.DataDir + ".log"
	m.args = []string{
		"--data-dir", m.DataDir, "--api-addr", m.APIAddr, "--raft-addr", m.RaftAddr,
		"--http-addr", m.HTTPAddr, "--node-id", o.NodeID,
	}
	if o.Join != "" {
		m.args = append(m.args, "--join", o.Join, "--join-token", o.JoinToken)
	}
	if o.LogStore != "" {
		m.args = append(m.args, "--raft-log-store", o.LogStore)
	}
	m.args = append(m.args, o.Args...)
	t.Cleanup(func() {
		if m.Running() {
			m.signal(syscall.SIGKILL)
			m.wait(StopTimeout)
		}
		if t.Failed() {
			t.Logf("--- last lines of %s (%s) ---\n%s", m.NodeID, m.LogPath, m.LogTail(40))
		}
	})
	return m
}

// StartMember starts a member and waits until /healthz answers 200; it
// fails the test otherwise.
func StartMember(t testing.TB, o MemberOptions) *Member {
	t.Helper()
	m := NewMember(t, o)
	m.MustStart()
	return m
}

// Start starts the process (again, with the same flags and data dir) without waiting.
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil && !closed(m.done) {
		return fmt.Errorf("member %s is already running", m.NodeID)
	}
	f, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	m.starts++
	fmt.Fprintf(f, "=== harness: start #%d at %s: roost-hub %s\n", m.starts, time.Now().Format(time.RFC3339Nano), strings.Join(m.args, " "))
	cmd := exec.Command(HubBinary(m.t), m.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start roost-hub %s: %w", m.NodeID, err)
	}
	done := make(chan struct{})
	m.cmd, m.done, m.waitErr = cmd, done, nil
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== harness: exited at %s: %v\n", time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		m.mu.Lock()
		m.waitErr = err
		m.mu.Unlock()
		close(done)
	}()
	return nil
}

// MustStart starts the process and waits until it is healthy, failing the test otherwise.
func (m *Member) MustStart() {
	m.t.Helper()
	if err := m.Start(); err != nil {
		m.t.Fatal(err)
	}
	if err := m.WaitHealthy(HealthyTimeout); err != nil {
		m.t.Fatal(err)
	}
}

// Restart starts a stopped member again on the same data dir with the same
// flags and waits until it is healthy; it returns how long that took.
func (m *Member) Restart() time.Duration {
	m.t.Helper()
	start := time.Now()
	m.MustStart()
	return time.Since(start)
}

// WaitHealthy polls /healthz until it answers 200 (the member knows a
// leader), the process exits, or timeout passes.
func (m *Member) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	url := "http://" + m.HTTPAddr + "/healthz"
	last := "no answer yet"
	for {
		if !m.Running() {
			return fmt.Errorf("member %s exited while waiting for /healthz (%v); log tail:\n%s", m.NodeID, m.ExitErr(), m.LogTail(20))
		}
		resp, err := hc.Get(url)
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(b.String()))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("member %s: /healthz not 200 after %s (last: %s)", m.NodeID, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LeadsByMetrics reports whether the member's /metrics says it leads
// (roost_raft_leader 1); false when it does not answer.
func (m *Member) LeadsByMetrics() bool {
	hc := &http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + m.HTTPAddr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	for _, line := range strings.Split(b.String(), "\n") {
		if line == "roost_raft_leader 1" {
			return true
		}
	}
	return false
}

// Stop sends sig (syscall.SIGTERM for a graceful stop, syscall.SIGKILL for
// a crash) and waits until the process exits; after StopTimeout it kills
// the process and fails the test.
func (m *Member) Stop(sig syscall.Signal) {
	m.t.Helper()
	if !m.Running() {
		m.t.Fatalf("stop %s: not running", m.NodeID)
	}
	if err := m.signal(sig); err != nil {
		m.t.Fatalf("signal %s: %v", m.NodeID, err)
	}
	if !m.wait(StopTimeout) {
		m.signal(syscall.SIGKILL)
		m.wait(StopTimeout)
		m.t.Fatalf("member %s did not exit within %s of %v; killed it", m.NodeID, StopTimeout, sig)
	}
}

// Signal sends sig and returns at once (SIGSTOP and SIGCONT freeze and
// thaw a member: a hung process that keeps its sockets open).
func (m *Member) Signal(sig syscall.Signal) error { return m.signal(sig) }

// Kill sends SIGKILL and returns at once, without waiting for the exit
// (use it to crash a member in the middle of traffic; Wait or Stop later).
func (m *Member) Kill() error { return m.signal(syscall.SIGKILL) }

// Wait waits up to timeout for the process to exit and reports whether it did.
func (m *Member) Wait(timeout time.Duration) bool { return m.wait(timeout) }

func (m *Member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("never started")
	}
	return cmd.Process.Signal(sig)
}

func (m *Member) wait(timeout time.Duration) bool {
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Running reports whether the process is running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil && !closed(m.done)
}

// ExitErr returns the last process's exit error (nil while running or after a clean exit).
func (m *Member) ExitErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waitErr
}

// Args returns the member's command-line flags.
func (m *Member) Args() []string { return append([]string(nil), m.args...) }

// AdminConfigPath returns DATA_DIR/admin.conf (written by a bootstrap member).
func (m *Member) AdminConfigPath() string { return filepath.Join(m.DataDir, "admin.conf") }

// WaitAdminConfig waits until DATA_DIR/admin.conf loads and returns its path.
func (m *Member) WaitAdminConfig(timeout time.Duration) string {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := client.LoadConfig(m.AdminConfigPath())
		if err == nil {
			return m.AdminConfigPath()
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("member %s: no usable admin.conf after %s: %v", m.NodeID, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LogTail returns the last n lines of the member's log (all its runs).
func (m *Member) LogTail(n int) string { return tailFile(m.LogPath, n) }

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Report prints a figure both to the test log and to standard output, so
// it shows in CI logs under `go test -v` whether the test passes or not.
func Report(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Logf(format, args...)
	fmt.Printf("%s: %s\n", t.Name(), fmt.Sprintf(format, args...))
}

// Context returns a context that ends after timeout or when the test ends.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
