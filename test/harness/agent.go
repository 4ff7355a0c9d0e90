package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roostfleet/roost/client"
)

var (
	agentOnce sync.Once
	agentBin  string
	agentErr  error
)

// AgentBinary returns the path of roost-agent: $ROOST_BIN/roost-agent, or
// built once per test binary next to the other binaries the harness built.
func AgentBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(findBinaries)
	agentOnce.Do(func() {
		if dir := os.Getenv(EnvBin); dir != "" {
			agentBin, agentErr = existing(filepath.Join(dir, "roost-agent"))
			return
		}
		if buildDir == "" {
			agentErr = fmt.Errorf("no build directory (%v)", hubErr)
			return
		}
		root, err := moduleRoot()
		if err != nil {
			agentErr = err
			return
		}
		agentBin = filepath.Join(buildDir, "roost-agent")
		agentErr = goBuild(root, "./cmd/roost-agent", agentBin)
	})
	if agentErr != nil {
		t.Fatalf("roost-agent binary: %v", agentErr)
	}
	return agentBin
}

// Proc is a process the harness runs (roost-agent, its simulator) with its
// standard error in a log file and its standard output scanned line by
// line.
type Proc struct {
	t       testing.TB
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error

	mu    sync.Mutex
	lines []string // standard output
	last  map[string]int64
}

// StartProc starts bin with args; the process is killed when the test ends
// and the tail of its log printed when the test failed.
func StartProc(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, Name: name, LogPath: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{}), last: map[string]int64{}}
	f, err := os.Create(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "=== harness: %s %s\n", bin, strings.Join(args, " "))
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = f
	p.cmd.SysProcAttr = sysProcAttr()
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(f, "stdout: %s\n", line)
			p.mu.Lock()
			p.lines = append(p.lines, line)
			for _, m := range counterRE.FindAllStringSubmatch(line, -1) {
				n, _ := strconv.ParseInt(m[2], 10, 64)
				p.last[m[1]] = n
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		<-readDone
		err := p.cmd.Wait()
		fmt.Fprintf(f, "=== harness: exited at %s: %v\n", time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.Running() {
			p.cmd.Process.Signal(syscall.SIGKILL)
			p.Wait(StopTimeout)
		}
		if t.Failed() {
			t.Logf("--- last lines of %s (%s) ---\n%s", name, p.LogPath, tailFile(p.LogPath, 40))
		}
	})
	return p
}

var counterRE = regexp.MustCompile(`\b([a-z]+)=(-?\d+)\b`)

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Running reports whether the process is running.
func (p *Proc) Running() bool { return !closed(p.done) }

// Signal sends sig.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and reports whether it did.
func (p *Proc) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// ExitCode returns the exit status once exited (-1 while running or when
// killed by a signal).
func (p *Proc) ExitCode() int {
	if p.Running() {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ee *exec.ExitError
	if p.exitErr == nil {
		return 0
	}
	if errors.As(p.exitErr, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after StopTimeout).
func (p *Proc) Stop() {
	if !p.Running() {
		return
	}
	p.Signal(syscall.SIGTERM)
	if !p.Wait(StopTimeout) {
		p.Signal(syscall.SIGKILL)
		p.Wait(StopTimeout)
		p.t.Errorf("%s did not stop within %s of SIGTERM; killed it", p.Name, StopTimeout)
	}
}

// Log returns the process's log (standard error, and standard output lines
// prefixed "stdout: ").
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Counter returns the last value of "name=N" printed on standard output
// (the simulator's progress lines), and whether one was printed.
func (p *Proc) Counter(name string) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.last[name]
	return v, ok
}

// Lines returns the standard output lines so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// WaitLog polls the log until it contains s, the process exits, or timeout.
func (p *Proc) WaitLog(s string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(p.Log(), s) {
			return nil
		}
		if !p.Running() {
			if strings.Contains(p.Log(), s) {
				return nil
			}
			return fmt.Errorf("%s exited (code %d) before logging %q", p.Name, p.ExitCode(), s)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not log %q within %s", p.Name, s, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitCounter polls until the simulator's counter satisfies ok, or timeout.
func (p *Proc) WaitCounter(name string, ok func(int64) bool, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(timeout)
	for {
		v, _ := p.Counter(name)
		if ok(v) {
			return v, nil
		}
		if !p.Running() {
			return v, fmt.Errorf("%s exited (code %d); %s=%d", p.Name, p.ExitCode(), name, v)
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("%s: %s=%d after %s", p.Name, name, v, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PID returns the member's process id (0 when not running).
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil || closed(m.done) {
		return 0
	}
	return m.cmd.Process.Pid
}

// RSSBytes returns a process's resident set size (VmRSS of /proc/PID/status).
func RSSBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				return n * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// Metric returns the value of an unlabelled metric from the member's /metrics.
func (m *Member) Metric(name string) (float64, error) {
	line, err := m.MetricLine(name + " ")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name+" ")), 64)
}

// MetricLine returns the first line of the member's /metrics that starts
// with prefix (e.g. `roost_build_info{`).
func (m *Member) MetricLine(prefix string) (string, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + m.HTTPAddr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line, nil
		}
	}
	return "", fmt.Errorf("%s: no metric %s", m.NodeID, strings.TrimSpace(prefix))
}

// tokenRE matches an enrollment token secret.
var tokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// CreateToken runs `roostctl token create -o json` with extra args (e.g.
// "--ttl", "1h", "--uses", "3") and returns the secret and the token's name
// (its first six characters).
func CreateToken(t testing.TB, cfgPath string, args ...string) (secret, name string) {
	t.Helper()
	r := MustCtl(t, cfgPath, append([]string{"token", "create", "-o", "json"}, args...)...)
	var doc struct {
		Token string `json:"token"`
		Name  string `json:"name"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil || !tokenRE.MatchString(doc.Token) {
		t.Fatalf("roostctl token create -o json printed no token (%v):\n%s", err, r)
	}
	name = doc.Name
	if name == "" {
		name = doc.Token[:6]
	}
	return doc.Token, name
}

// RevokeToken runs `roostctl token revoke NAME`.
func RevokeToken(t testing.TB, cfgPath, name string) {
	t.Helper()
	MustCtl(t, cfgPath, "token", "revoke", name)
}

// WriteCA writes the CA of a client configuration (admin.conf) to a PEM
// file in a temporary directory and returns its path, for roost-agent --ca.
func WriteCA(t testing.TB, cfgPath string) string {
	t.Helper()
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hub-ca.pem")
	if err := os.WriteFile(path, []byte(cfg.CertificateAuthority), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// WaitUntil polls f every 100 ms until it returns nil or timeout passes,
// then returns f's last error.
func WaitUntil(timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return Poll(ctx, f)
}
