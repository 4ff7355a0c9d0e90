package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roostfleet/roost/bmc/redfish/redfishtest"
)

// OVMF firmware of Debian's ovmf package (images/deps.sh --e2e).
const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// BondMACs are the fixed MACs of the four extra NICs, in order; the
// NetworkProfile of the test matches its links by them.
var BondMACs = []string{"52:54:00:e2:00:11", "52:54:00:e2:00:12", "52:54:00:e2:00:13", "52:54:00:e2:00:14"}

// VMConfig describes one QEMU server.
type VMConfig struct {
	Dir       string // holds disk.raw, vars.fd and console.log; kept across power cycles
	ISO       string // enrollment ISO, attached as a CD-ROM after the disk in boot order
	UUID      string // SMBIOS system UUID (the Server's name on the hub)
	MgmtMAC   string // MAC of the management NIC (user networking, DHCP, SSH forward)
	SSHPort   int    // host port on 127.0.0.1 forwarded to the guest's port 22
	DiskBytes int64  // size of the sparse raw disk; default 10 GiB
	MemoryMiB int    // default 1536
	BondNICs  bool   // add four isolated NICs with the fixed BondMACs
	// Netboot, when set, is a boot URL (roostctl netboot url): the server
	// has no CD drive, and its management NIC boots after the empty disk
	// with QEMU's iPXE option ROM (efi-virtio.rom of ipxe-qemu), to which
	// QEMU's DHCP server hands the URL as the boot file.
	Netboot string
	// SeaBIOS boots the server with QEMU's default legacy BIOS instead of
	// OVMF (UEFI): such a server enrolls but is refused at claim time.
	SeaBIOS bool
	// ReadOnlyDataDisk attaches a 64 MiB data disk read-only (QEMU
	// readonly=on: the guest sees a write-protected virtio disk, so any
	// write to it fails with EROFS), after the install disk.
	ReadOnlyDataDisk bool
}

// VM is a QEMU server: UEFI (or SeaBIOS), an empty disk that boots first, the ISO
// as a fallback. PowerOff and PowerOn keep the disk, the UEFI variables and
// the console log (appended to).
type VM struct {
	t       testing.TB
	cfg     VMConfig
	qemu    string
	Disk    string
	Vars    string
	Console string
	QEMULog string

	// Diagnose, when set, returns more text to print when a wait fails
	// (hub log tail, roostctl describe output, ...).
	Diagnose func() string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	boots   int
	started time.Time
	// emu, when set, is the BMC emulator's QEMU that runs this server
	// instead (see UnderBMC): the BMC powers it and inserts its CD.
	emu *redfishtest.QEMU
}

// NewVM prepares the disk and the UEFI variable store of a new server. It
// skips the test when QEMU or OVMF are missing, and kills the VM in cleanup.
func NewVM(t testing.TB, cfg VMConfig) *VM {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 missing (images/deps.sh --e2e)")
	}
	for _, f := range []string{ovmfCode, ovmfVars} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("OVMF not installed (images/deps.sh --e2e): %v", err)
		}
	}
	if cfg.DiskBytes == 0 {
		cfg.DiskBytes = 10 << 30
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 1536
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	v := &VM{t: t, cfg: cfg, qemu: qemu,
		Disk:    filepath.Join(cfg.Dir, "disk.raw"),
		Vars:    filepath.Join(cfg.Dir, "vars.fd"),
		Console: filepath.Join(cfg.Dir, "console.log"),
		QEMULog: filepath.Join(cfg.Dir, "qemu.log"),
	}
	// an empty, sparse disk: no partition table, so the firmware skips it
	// and boots the ISO until the agent installs the ESP
	f, err := os.Create(v.Disk)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(cfg.DiskBytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if cfg.ReadOnlyDataDisk {
		if err := os.WriteFile(filepath.Join(cfg.Dir, "data-ro.raw"), make([]byte, 64<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars, err := os.ReadFile(ovmfVars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v.Vars, vars, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.kill)
	return v
}

// args is the QEMU command line of the server.
func (v *VM) args() []string {
	c := v.cfg
	a := []string{
		"-name", "roost-e2e-" + c.UUID[len(c.UUID)-8:],
		"-machine", "pc", "-m", fmt.Sprint(c.MemoryMiB), "-smp", "1",
		"-display", "none", "-monitor", "none", "-nodefaults",
		"-vga", "std",
	}
	if !c.SeaBIOS {
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+v.Vars)
	}
	a = append(a,
		"-smbios", "type=1,manufacturer=Roost,product=e2e,serial=e2e-"+c.UUID[len(c.UUID)-8:]+",uuid="+c.UUID,
		// serial console, appended across power cycles
		"-chardev", "file,id=con0,path="+v.Console+",append=on",
		"-serial", "chardev:con0",
		// the install disk boots first; the empty disk has nothing to boot,
		// so the firmware falls through to the ISO until the agent installs
		// discard=unmap: a guest BLKDISCARD punches holes in the raw file
		"-drive", "if=none,id=disk0,format=raw,cache=writeback,discard=unmap,file="+v.Disk,
		"-device", "virtio-blk-pci,drive=disk0,serial=roost-e2e-disk0,bootindex=0",
	)
	if c.Netboot == "" {
		a = append(a,
			"-drive", "if=none,id=cd0,media=cdrom,readonly=on,file="+c.ISO,
			"-device", "ide-cd,drive=cd0,bootindex=1",
			// management NIC: DHCP from QEMU, the hub at 10.0.2.2, SSH forwarded
			"-netdev", fmt.Sprintf("user,id=mgmt,hostfwd=tcp:127.0.0.1:%d-:22", c.SSHPort),
			"-device", "virtio-net-pci,netdev=mgmt,mac="+c.MgmtMAC+",romfile=")
	} else {
		// no CD; the NIC keeps its iPXE ROM and boots second; QEMU's DHCP
		// server hands out the boot URL, which iPXE fetches and runs
		a = append(a,
			"-netdev", fmt.Sprintf("user,id=mgmt,hostfwd=tcp:127.0.0.1:%d-:22,bootfile=%s", c.SSHPort, c.Netboot),
			"-device", "virtio-net-pci,netdev=mgmt,mac="+c.MgmtMAC+",bootindex=1")
	}
	if c.ReadOnlyDataDisk {
		a = append(a,
			"-drive", "if=none,id=data0,format=raw,readonly=on,file="+filepath.Join(c.Dir, "data-ro.raw"),
			"-device", "virtio-blk-pci,drive=data0,serial=roost-e2e-data-ro")
	}
	// four isolated NICs for bonds. Each has its own subnet, so the route
	// to the hub (10.0.2.0/24) exists only on the management NIC even while
	// the testbed still runs DHCP on every NIC.
	for i, mac := range BondMACs {
		if !c.BondNICs {
			break
		}
		id := fmt.Sprintf("n%d", i+1)
		a = append(a,
			"-netdev", fmt.Sprintf("user,id=%s,restrict=on,net=10.0.%d.0/24", id, 11+i),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=%s,mac=%s,romfile=", id, mac))
	}
	return a
}

// UnderBMC hands the server to a BMC emulator (redfishtest) instead of
// starting QEMU itself: the emulator's QEMU runs the same machine (disk,
// UEFI variables, SMBIOS UUID, NICs, console log) without the VM's CD,
// since the emulator adds its own virtual CD drive, empty until a BMC
// client inserts media, and without the disk's boot index, since the BMC
// sets the boot order (a one-time boot from CD; the empty disk has
// nothing to boot anyway). The machine stays off until the BMC powers it
// on. QEMU's output goes to QEMULog.
func (v *VM) UnderBMC() *redfishtest.QEMU {
	v.t.Helper()
	var args []string
	skip := map[string]int{"-display": 1, "-nodefaults": 0, "-monitor": 1}
	a := v.args()
	for i := 0; i < len(a); i++ {
		if n, ok := skip[a[i]]; ok {
			i += n
			continue
		}
		// the VM's CD drive and device: the emulator has its own
		if i+1 < len(a) && (a[i] == "-drive" || a[i] == "-device") && (strings.Contains(a[i+1], "id=cd0") || strings.Contains(a[i+1], "drive=cd0")) {
			i++
			continue
		}
		// the boot order is the BMC's (QEMU's -boot, which bootindex
		// properties would override)
		args = append(args, strings.Replace(a[i], ",bootindex=0", "", 1))
	}
	logf, err := os.OpenFile(v.QEMULog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		v.t.Fatal(err)
	}
	q, err := redfishtest.NewQEMU(redfishtest.QEMUConfig{Binary: v.qemu, Args: args, Stdout: logf, Stderr: logf})
	if err != nil {
		logf.Close()
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { q.Close(); logf.Close() })
	v.mu.Lock()
	v.emu = q
	v.mu.Unlock()
	return q
}

// Start powers the server on the first time; PowerOn after PowerOff.
func (v *VM) Start() { v.t.Helper(); v.PowerOn() }

// PowerOn starts QEMU with the same disk, UEFI variables and console log.
func (v *VM) PowerOn() {
	v.t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cmd != nil {
		v.t.Fatal("vm: PowerOn while running")
	}
	v.boots++
	v.mark(fmt.Sprintf("power on #%d", v.boots))
	cmd := exec.Command(v.qemu, v.args()...)
	logf, err := os.OpenFile(v.QEMULog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		v.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// QEMU dies with the test binary (e.g. when go test -timeout fires)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		v.t.Fatalf("vm: start qemu: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	v.cmd, v.exited, v.started = cmd, exited, time.Now()
	v.t.Logf("vm: powered on (pid %d, boot %d): console %s", cmd.Process.Pid, v.boots, v.Console)
}

// PowerOff pulls the plug: QEMU is killed (SIGKILL) and waited for.
func (v *VM) PowerOff() {
	v.t.Helper()
	v.kill()
	v.mark("power off")
	v.t.Logf("vm: powered off")
}

func (v *VM) kill() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cmd == nil {
		return
	}
	_ = v.cmd.Process.Kill()
	select {
	case <-v.exited:
	case <-time.After(30 * time.Second):
		v.t.Logf("vm: qemu pid %d did not exit 30s after SIGKILL", v.cmd.Process.Pid)
	}
	v.cmd, v.exited = nil, nil
}

// Died reports whether QEMU ended without the test asking: always false
// for a server under a BMC (UnderBMC), which powers it off and on as the
// hub tells it (it starts off, and a power cycle stops it for a moment).
func (v *VM) Died() bool {
	v.mu.Lock()
	emu := v.emu != nil
	v.mu.Unlock()
	return !emu && !v.Running()
}

// Running reports whether QEMU runs.
func (v *VM) Running() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.emu != nil {
		return v.emu.Running()
	}
	if v.cmd == nil {
		return false
	}
	select {
	case <-v.exited:
		return false
	default:
		return true
	}
}

// mark appends a line to the console log, so a reader sees power cycles.
func (v *VM) mark(what string) {
	f, err := os.OpenFile(v.Console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "\r\n===== e2e: %s at %s =====\r\n", what, time.Now().UTC().Format(time.RFC3339))
	f.Close()
}

// ConsoleOffset is the console log's current size: pass it to the waits to
// look only at what the server prints from now on.
func (v *VM) ConsoleOffset() int64 {
	st, err := os.Stat(v.Console)
	if err != nil {
		return 0
	}
	return st.Size()
}

// ConsoleSince returns the console text from offset on.
func (v *VM) ConsoleSince(offset int64) string {
	f, err := os.Open(v.Console)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// WaitConsole waits until substr appears in the console after offset and
// returns the offset just past it. On timeout (or ctx's end) it fails the
// test with the console tail and the Diagnose text.
func (v *VM) WaitConsole(ctx context.Context, offset int64, substr string, timeout time.Duration) int64 {
	v.t.Helper()
	end, _ := v.waitConsole(ctx, offset, timeout, fmt.Sprintf("%q on the console", substr), func(s string) (int, string) {
		i := strings.Index(s, substr)
		if i < 0 {
			return -1, ""
		}
		return i + len(substr), substr
	})
	return end
}

// WaitConsoleRegexp is WaitConsole for a regular expression; it also
// returns the match's submatches.
func (v *VM) WaitConsoleRegexp(ctx context.Context, offset int64, re *regexp.Regexp, timeout time.Duration) (int64, []string) {
	v.t.Helper()
	var subs []string
	end, _ := v.waitConsole(ctx, offset, timeout, fmt.Sprintf("/%s/ on the console", re), func(s string) (int, string) {
		loc := re.FindStringSubmatchIndex(s)
		if loc == nil {
			return -1, ""
		}
		subs = nil
		for i := 0; i+1 < len(loc); i += 2 {
			if loc[i] < 0 {
				subs = append(subs, "")
			} else {
				subs = append(subs, s[loc[i]:loc[i+1]])
			}
		}
		return loc[1], s[loc[0]:loc[1]]
	})
	return end, subs
}

func (v *VM) waitConsole(ctx context.Context, offset int64, timeout time.Duration, what string, match func(string) (int, string)) (int64, string) {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		s := v.ConsoleSince(offset)
		if end, m := match(s); end >= 0 {
			return offset + int64(end), m
		}
		if v.Died() {
			v.Fatalf("waiting for %s: QEMU is not running (qemu log %s:\n%s)", what, v.QEMULog, tailFile(v.QEMULog, 2000))
		}
		select {
		case <-ctx.Done():
			v.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(time.Second):
		}
	}
}

// Fatalf fails the test with the console tail and the Diagnose text.
func (v *VM) Fatalf(format string, args ...any) {
	v.t.Helper()
	v.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), v.Diagnostics())
}

// Diagnostics is the console tail and the Diagnose text.
func (v *VM) Diagnostics() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "----- console tail (%s) -----\n%s\n", v.Console, tail(sanitize(v.ConsoleSince(0)), 8000))
	if v.Diagnose != nil {
		b.WriteString(v.Diagnose())
	}
	return b.String()
}

// CountConsole counts substr in the console after offset.
func (v *VM) CountConsole(offset int64, substr string) int {
	return strings.Count(v.ConsoleSince(offset), substr)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return tail(string(b), n)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// sanitize drops the terminal escape sequences firmware and systemd print,
// so the tails read well in test logs.
var escapes = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\r`)

func sanitize(s string) string { return escapes.ReplaceAllString(s, "") }
