package redfishtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// QEMU drive and device ids of the virtual CD.
const (
	cdDrive  = "cd0" // -drive id
	cdDevice = "cd"  // -device id (qdev)
)

// QEMUConfig is how the emulator runs QEMU.
type QEMUConfig struct {
	// Binary is the QEMU system emulator; default qemu-system-x86_64.
	Binary string
	// Args are appended to the command line the emulator builds (e.g. -S to
	// boot nothing, -m 256, a disk). The emulator adds -nodefaults,
	// -display none, the QMP socket, the CD drive and -boot.
	Args []string
	// Stdout and Stderr get QEMU's output; nil discards it.
	Stdout, Stderr *os.File
}

// Boot is the boot override QEMU starts with: a -boot letter (c disk, d CD,
// n network; "" for QEMU's default order) and whether it holds for one
// boot only.
type Boot struct {
	Device string
	Once   bool
}

// QEMU is one virtual machine, off (no process) or on (a QEMU process whose
// QMP socket the emulator holds). It is safe for concurrent use.
type QEMU struct {
	cfg QEMUConfig
	dir string // holds the QMP socket (short path: sockets have a length limit)

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd exits
	mon     *qmp.SocketMonitor
	media   string   // image file in the CD drive, "" for none
	cmdline []string // of the last start
}

// NewQEMU returns a powered-off machine with an empty CD drive. Close
// stops it and removes its files.
func NewQEMU(cfg QEMUConfig) (*QEMU, error) {
	if cfg.Binary == "" {
		cfg.Binary = "qemu-system-x86_64"
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	dir, err := os.MkdirTemp("", "bmcemu-")
	if err != nil {
		return nil, err
	}
	return &QEMU{cfg: cfg, dir: dir}, nil
}

// Close powers the machine off and removes its files.
func (q *QEMU) Close() error {
	err := q.PowerOff(context.Background())
	os.RemoveAll(q.dir)
	return err
}

// Running says whether QEMU runs (the server is powered on). A guest that
// powers itself off ends QEMU, and so reads as off.
func (q *QEMU) Running() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.runningLocked()
}

func (q *QEMU) runningLocked() bool {
	if q.cmd == nil {
		return false
	}
	select {
	case <-q.done:
		return false
	default:
		return true
	}
}

// Cmdline is the command line of the last start (nil before the first).
func (q *QEMU) Cmdline() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.cmdline...)
}

// Media is the image file in the CD drive, "" when it is empty.
func (q *QEMU) Media() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.media
}

// escapeOpt doubles commas, QEMU's escape inside an option value.
func escapeOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// PowerOn starts QEMU with the current media and boot; a running machine
// is left alone (and boot unused). It returns once QMP answers.
func (q *QEMU) PowerOn(ctx context.Context, boot Boot) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.runningLocked() {
		return nil
	}
	q.cleanupLocked()
	sock := filepath.Join(q.dir, "qmp.sock")
	os.Remove(sock)
	drive := "if=none,id=" + cdDrive + ",media=cdrom,readonly=on"
	if q.media != "" {
		drive += ",format=raw,file=" + escapeOpt(q.media)
	}
	args := []string{"-nodefaults", "-no-user-config", "-display", "none",
		"-qmp", "unix:" + escapeOpt(sock) + ",server=on,wait=off",
		"-drive", drive, "-device", "ide-cd,drive=" + cdDrive + ",id=" + cdDevice}
	switch {
	case boot.Device != "" && boot.Once:
		args = append(args, "-boot", "once="+boot.Device)
	case boot.Device != "":
		args = append(args, "-boot", "order="+boot.Device)
	}
	args = append(args, q.cfg.Args...)
	cmd := exec.Command(q.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = q.cfg.Stdout, q.cfg.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	q.cmd, q.done, q.cmdline = cmd, done, append([]string{q.cfg.Binary}, args...)

	deadline := time.Now().Add(15 * time.Second)
	for {
		mon, err := qmp.NewSocketMonitor("unix", sock, time.Second)
		if err == nil {
			if err = mon.Connect(); err == nil {
				q.mon = mon
				return nil
			}
			mon.Disconnect()
		}
		select {
		case <-done:
			q.cleanupLocked()
			return fmt.Errorf("qemu exited at start (%s): %v", cmd.ProcessState, err)
		case <-ctx.Done():
			q.killLocked()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			q.killLocked()
			return fmt.Errorf("qemu: no QMP on %s: %v", sock, err)
		}
	}
}

// PowerOff ends QEMU at once (QMP quit, then SIGKILL if it lingers); an
// off machine is left alone.
func (q *QEMU) PowerOff(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.runningLocked() {
		q.cleanupLocked()
		return nil
	}
	if q.mon != nil {
		q.mon.Run([]byte(`{"execute":"quit"}`)) // the connection may close before the answer
	}
	select {
	case <-q.done:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	q.killLocked()
	return nil
}

// Reset resets the running machine (QMP system_reset).
func (q *QEMU) Reset(ctx context.Context) error {
	_, err := q.run("system_reset", nil)
	return err
}

// killLocked kills QEMU and waits for it.
func (q *QEMU) killLocked() {
	if q.cmd != nil && q.runningLocked() {
		q.cmd.Process.Kill()
		<-q.done
	}
	q.cleanupLocked()
}

// cleanupLocked drops the QMP connection and process of an ended QEMU.
func (q *QEMU) cleanupLocked() {
	if q.mon != nil {
		q.mon.Disconnect()
		q.mon = nil
	}
	if q.cmd != nil && !q.runningLocked() {
		q.cmd, q.done = nil, nil
	}
}

// run executes a QMP command on the running machine and returns its
// "return" value.
func (q *QEMU) run(command string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.runLocked(command, args)
}

func (q *QEMU) runLocked(command string, args any) (json.RawMessage, error) {
	if !q.runningLocked() || q.mon == nil {
		return nil, errors.New("qemu is not running")
	}
	req, err := json.Marshal(qmp.Command{Execute: command, Args: args})
	if err != nil {
		return nil, err
	}
	raw, err := q.mon.Run(req)
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", command, err)
	}
	var resp struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", command, err)
	}
	return resp.Return, nil
}

// InsertMedia puts the image file at path in the CD drive: through QMP
// blockdev-change-medium when QEMU runs, on the next start's command line
// otherwise.
func (q *QEMU) InsertMedia(path string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.runningLocked() {
		if _, err := q.runLocked("blockdev-change-medium", map[string]any{
			"id": cdDevice, "filename": path, "format": "raw", "read-only-mode": "read-only",
		}); err != nil {
			return err
		}
	}
	q.media = path
	return nil
}

// EjectMedia empties the CD drive (QMP eject, forced, when QEMU runs).
func (q *QEMU) EjectMedia() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.runningLocked() {
		if _, err := q.runLocked("eject", map[string]any{"id": cdDevice, "force": true}); err != nil {
			return err
		}
	}
	q.media = ""
	return nil
}

// BlockInfo is one entry of QMP query-block, as far as tests need it.
type BlockInfo struct {
	Device    string `json:"device"`
	QDev      string `json:"qdev"`
	Removable bool   `json:"removable"`
	TrayOpen  bool   `json:"tray_open"`
	Inserted  *struct {
		File string `json:"file"`
		RO   bool   `json:"ro"`
	} `json:"inserted"`
}

// QueryBlock runs QMP query-block on the running machine.
func (q *QEMU) QueryBlock() ([]BlockInfo, error) {
	raw, err := q.run("query-block", nil)
	if err != nil {
		return nil, err
	}
	var out []BlockInfo
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("query-block: %w", err)
	}
	return out, nil
}

// CDMedia is the file in the running machine's CD drive as QEMU sees it
// (QMP query-block), "" when the drive is empty.
func (q *QEMU) CDMedia() (string, error) {
	blocks, err := q.QueryBlock()
	if err != nil {
		return "", err
	}
	for _, b := range blocks {
		if b.Device == cdDrive {
			if b.Inserted == nil {
				return "", nil
			}
			return b.Inserted.File, nil
		}
	}
	return "", fmt.Errorf("query-block: no drive %s", cdDrive)
}

// Status is the run state from QMP query-status (e.g. "running",
// "prelaunch", "paused").
func (q *QEMU) Status() (string, error) {
	raw, err := q.run("query-status", nil)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", err
	}
	return st.Status, nil
}
