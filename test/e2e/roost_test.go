package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// repoPath is a path relative to the repository root (tests run in test/e2e).
func repoPath(p ...string) string {
	return filepath.Join(append([]string{"..", ".."}, p...)...)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Hub is a one-member roost-hub on loopback.
type Hub struct {
	Dir     string // data dir parent: hub/ (data) and hub.log
	Admin   string // admin.conf roostctl uses (ROOST_CONFIG)
	APIPort int
	// MediaPort serves enrollment ISOs to BMCs (roost-hub --media-addr).
	MediaPort int
	// BootPort serves network boot (roost-hub --boot-addr); its URLs name
	// the hub as QEMU's user network shows the host: 10.0.2.2:BootPort.
	BootPort int
	Log      string
	bin      string
	cmd      *exec.Cmd
}

// StartHub starts roost-hub with free loopback ports and waits for its
// admin.conf. The hub is killed (by PID) in cleanup.
func StartHub(t testing.TB, bin string) *Hub {
	t.Helper()
	dir := t.TempDir()
	h := &Hub{Dir: dir, APIPort: freePort(t), MediaPort: freePort(t), BootPort: freePort(t), Log: filepath.Join(dir, "hub.log"), bin: bin,
		Admin: filepath.Join(dir, "hub", "admin.conf")}
	cmd := exec.Command(filepath.Join(bin, "roost-hub"), "--data-dir", filepath.Join(dir, "hub"),
		"--api-addr", fmt.Sprintf("127.0.0.1:%d", h.APIPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--media-addr", fmt.Sprintf("127.0.0.1:%d", h.MediaPort),
		"--boot-addr", fmt.Sprintf("127.0.0.1:%d", h.BootPort), "--boot-url", fmt.Sprintf("http://10.0.2.2:%d", h.BootPort))
	logf, err := os.Create(h.Log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, err := os.Stat(h.Admin); err == nil && st.Size() > 0 {
			break
		}
		select {
		case <-exited:
			t.Fatalf("roost-hub exited:\n%s", tailFile(h.Log, 3000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("roost-hub wrote no %s within 60s:\n%s", h.Admin, tailFile(h.Log, 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return h
}

// Ctl runs roostctl against the hub and returns its standard output; err
// carries the exit status and standard error.
func (h *Hub) Ctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, "roostctl"), args...)
	cmd.Env = append(os.Environ(), "ROOST_CONFIG="+h.Admin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("roostctl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// MustCtl is Ctl that fails the test on error.
func (h *Hub) MustCtl(t testing.TB, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := h.Ctl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// GetJSON runs roostctl get KIND NAME -o json into v.
func (h *Hub) GetJSON(ctx context.Context, v any, kindAndNames ...string) error {
	out, err := h.Ctl(ctx, append(append([]string{"get"}, kindAndNames...), "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("roostctl get %s -o json: %v\n%s", strings.Join(kindAndNames, " "), err, out)
	}
	return nil
}

// Int64 reads a JSON number or a JSON string holding one (the protobuf JSON
// mapping writes int64 as a string).
type Int64 int64

func (n *Int64) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %s", b)
	}
	*n = Int64(v)
	return nil
}

// The parts of the objects the test reads (roostctl -o json).

type Meta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type Server struct {
	Metadata Meta `json:"metadata"`
	Spec     struct {
		SystemUUID    string   `json:"systemUuid"`
		PermanentMACs []string `json:"permanentMacs"`
	} `json:"spec"`
	Status struct {
		State          string      `json:"state"`
		StateReason    string      `json:"stateReason"`
		BootedRevision Int64       `json:"bootedRevision"`
		ImageVersion   string      `json:"imageVersion"`
		Conditions     []Condition `json:"conditions"`
		Reachability   string      `json:"reachability"`
		Cleaning       *struct {
			Mode       string   `json:"mode"`
			DataDisks  bool     `json:"dataDisks"`
			Attempts   int32    `json:"attempts"`
			Error      string   `json:"error"`
			Disks      []string `json:"disks"`
			FinishedAt string   `json:"finishedAt"`
		} `json:"cleaning"`
	} `json:"status"`
}

type ServerList struct {
	Kind  string   `json:"kind"`
	Items []Server `json:"items"`
}

type Machine struct {
	Metadata Meta `json:"metadata"`
	Spec     struct {
		Server   string `json:"server"`
		Pool     string `json:"pool"`
		Hostname string `json:"hostname"`
	} `json:"spec"`
	Status struct {
		Phase          string      `json:"phase"`
		Conditions     []Condition `json:"conditions"`
		Revision       Int64       `json:"revision"`
		BootedRevision Int64       `json:"bootedRevision"`
		FailedRevision Int64       `json:"failedRevision"`
	} `json:"status"`
}

type Revision struct {
	Metadata Meta `json:"metadata"`
	Status   struct {
		Phase  string `json:"phase"`
		Reason string `json:"reason"`
	} `json:"status"`
}

// condition returns the condition of type typ, or nil.
func condition(cs []Condition, typ string) *Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// listServers returns the Servers; a single Server comes back as a bare
// object when there is exactly one (roostctl prints a List otherwise).
func (h *Hub) listServers(ctx context.Context) ([]Server, error) {
	out, err := h.Ctl(ctx, "get", "servers", "-o", "json")
	if err != nil {
		return nil, err
	}
	out = strings.TrimSpace(out)
	if out == "" {
		return nil, nil
	}
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(out), &probe); err != nil {
		return nil, fmt.Errorf("get servers -o json: %v\n%s", err, out)
	}
	if probe.Kind == "List" {
		var l ServerList
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			return nil, fmt.Errorf("get servers -o json: %v\n%s", err, out)
		}
		return l.Items, nil
	}
	var s Server
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		return nil, fmt.Errorf("get servers -o json: %v\n%s", err, out)
	}
	return []Server{s}, nil
}
