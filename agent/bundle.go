package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// The support bundle (roostctl server bundle): a tar.gz the agent
// collects on the hub's request (HubMessage.collect_bundle) and streams
// back like the journal. Every entry is collected on its own: one that
// fails is named, with why, in errors.txt (always the last entry), and the
// rest of the bundle is still sent.

// Bundle entries, in the order they are collected.
const (
	BundleJournalThisBoot     = "journal/this-boot.log"
	BundleJournalPreviousBoot = "journal/previous-boot.log"
	BundleAgentState          = "agent/state.json"
	BundleInventory           = "agent/inventory.json"
	BundleBootEntries         = "boot/bootctl-list.txt"
	// BundleLoaderEntries is the folder of the ESP's Boot Loader
	// Specification entries (loader/entries/*.conf), copied verbatim.
	BundleLoaderEntries = "boot/loader-entries/"
	BundleAddresses     = "network/ip-addr.json"
	BundleLinks         = "network/ip-link.json"
	BundleRoutes        = "network/ip-route.json"
	BundleRoutes6       = "network/ip-route6.json"
	BundleDmesg         = "dmesg.txt"
	BundleUnitStatus    = "units/kubelet-containerd-status.txt"
	BundleFailedUnits   = "units/failed.txt"
	BundleErrors        = "errors.txt"
)

// Bounds of a bundle.
const (
	// MaxBundleEntry bounds one entry (bytes, before compression); a
	// larger one is cut and errors.txt says so.
	MaxBundleEntry = 8 << 20
	// BundleJournalLines is how many of the last journal entries of a boot
	// the bundle holds.
	BundleJournalLines = 50000
	// bundleReserve is kept free of the bundle's max_bytes for errors.txt
	// and the end of the archive.
	bundleReserve = 64 << 10
)

// Commands runs the programs whose output goes into a support bundle
// (bootctl, ip, dmesg, systemctl). Output returns the program's standard
// output, at most max bytes (more is cut, and truncated is set), and an
// error when it could not run or exited with a status not in okExit. The
// real one is ExecCommands; tests use a fake.
type Commands interface {
	Output(ctx context.Context, max int, okExit []int, name string, args ...string) (out []byte, truncated bool, err error)
}

// ExecCommands runs programs from $PATH.
type ExecCommands struct{}

// Output implements Commands; the error carries the start of the
// program's standard error.
func (ExecCommands) Output(ctx context.Context, max int, okExit []int, name string, args ...string) ([]byte, bool, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	stdout, stderr := &cappedBuffer{max: max}, &cappedBuffer{max: maxJournalctlStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && slices.Contains(okExit, exit.ExitCode()) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), stdout.Truncated, err
}

// bundleEntry is one file of the bundle and how to collect it; collect
// returns the entry's content, whether it was cut at MaxBundleEntry, and
// why it failed (a failed entry with content is still written).
type bundleEntry struct {
	name    string
	collect func(ctx context.Context) (data []byte, truncated bool, err error)
}

// onCollectBundle starts collecting a support bundle for the hub. What
// the loop owns (the agent's state, status and inventory) is read here,
// the rest in the request's goroutine.
func (s *session) onCollectBundle(req *roostv1.CollectBundle) {
	p := newDataParams(req.GetRequestId(), req.GetMaxBytes(), req.GetChunkBytes(), req.GetWindow())
	entries := s.a.bundleEntries()
	now := s.clock.Now()
	s.startData(p, func(ctx context.Context, w io.Writer) error {
		return writeBundle(ctx, w, entries, now, p.maxBytes)
	})
}

// bundleEntries lists the bundle's entries; the agent's own state is
// captured now (call it from the session's loop).
func (a *Agent) bundleEntries() []bundleEntry {
	state, stateErr := a.stateReport()
	inv, invErr := protojson.MarshalOptions{Multiline: true}.Marshal(a.sentInventory())
	fixed := func(b []byte, err error) func(context.Context) ([]byte, bool, error) {
		return func(context.Context) ([]byte, bool, error) { return b, false, err }
	}
	journal := func(boot int) func(context.Context) ([]byte, bool, error) {
		return func(ctx context.Context) ([]byte, bool, error) {
			if a.o.Journal == nil {
				return nil, false, errNoJournal
			}
			buf := &cappedBuffer{max: MaxBundleEntry}
			err := a.o.Journal.Read(ctx, JournalQuery{Boot: boot, Lines: BundleJournalLines}, buf)
			return buf.Bytes(), buf.Truncated, err
		}
	}
	run := func(okExit []int, name string, args ...string) func(context.Context) ([]byte, bool, error) {
		return func(ctx context.Context) ([]byte, bool, error) {
			if a.o.Commands == nil {
				return nil, false, errors.New("this agent runs no diagnostic commands (no Commands)")
			}
			return a.o.Commands.Output(ctx, MaxBundleEntry, okExit, name, args...)
		}
	}
	entries := []bundleEntry{
		{BundleJournalThisBoot, journal(0)},
		{BundleJournalPreviousBoot, journal(-1)},
		{BundleAgentState, fixed(state, stateErr)},
		{BundleInventory, fixed(inv, invErr)},
	}
	if a.host != nil {
		// the agent mounts the ESP where bootctl does not look by itself
		entries = append(entries, bundleEntry{BundleBootEntries, run(nil, "bootctl", "--esp-path="+a.host.ESPDir, "list", "--no-pager")})
		entries = append(entries, a.loaderEntries()...)
	} else {
		entries = append(entries, bundleEntry{BundleBootEntries, run(nil, "bootctl", "list", "--no-pager")})
	}
	// systemctl status exits 3 for an inactive unit and 4 for a missing
	// one, and still prints what it knows.
	return append(entries,
		bundleEntry{BundleAddresses, run(nil, "ip", "-j", "address", "show")},
		bundleEntry{BundleLinks, run(nil, "ip", "-j", "-s", "link", "show")},
		bundleEntry{BundleRoutes, run(nil, "ip", "-j", "route", "show", "table", "all")},
		bundleEntry{BundleRoutes6, run(nil, "ip", "-j", "-6", "route", "show", "table", "all")},
		bundleEntry{BundleDmesg, run(nil, "dmesg", "--time-format=iso")},
		bundleEntry{BundleUnitStatus, run([]int{3, 4}, "systemctl", "status", "--no-pager", "--full", "--lines=50", "kubelet.service", "containerd.service")},
		bundleEntry{BundleFailedUnits, run(nil, "systemctl", "list-units", "--failed", "--no-pager", "--full")},
	)
}

// errNoJournal answers requests to an agent built without a Journal.
var errNoJournal = errors.New("this agent reads no journal (roost-agent started without one)")

// stateReport is the agent's state as the bundle shows it: what it keeps
// (State), its certificate's name and validity (never the key), and the
// status it reports (conditions, failed Revisions), as JSON.
func (a *Agent) stateReport() ([]byte, error) {
	report := struct {
		State       State           `json:"state"`
		Certificate map[string]any  `json:"certificate,omitempty"`
		Hub         string          `json:"hub,omitempty"`
		Status      json.RawMessage `json:"status,omitempty"`
	}{State: a.state, Hub: a.tried}
	if c := a.cert.Load(); c != nil && c.Leaf != nil {
		report.Certificate = map[string]any{"subject": c.Leaf.Subject.String(), "serial": c.Leaf.SerialNumber.Text(16),
			"notBefore": c.Leaf.NotBefore.UTC(), "notAfter": c.Leaf.NotAfter.UTC()}
	}
	st := a.statusMessage(nil).GetStatus()
	if b, err := protojson.Marshal(st); err == nil {
		report.Status = b
	}
	return json.MarshalIndent(report, "", "  ")
}

// loaderEntries are the Boot Loader Specification entries on the ESP
// (read when the bundle is written; none before the install).
func (a *Agent) loaderEntries() []bundleEntry {
	dir := filepath.Join(a.host.ESPDir, "loader", "entries")
	names, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil || len(names) == 0 {
		return []bundleEntry{{BundleLoaderEntries + "README", func(context.Context) ([]byte, bool, error) {
			return []byte("no boot entries in " + dir + " (not installed, or the ESP is not mounted)\n"), false, nil
		}}}
	}
	var out []bundleEntry
	for _, n := range names {
		out = append(out, bundleEntry{BundleLoaderEntries + filepath.Base(n), func(context.Context) ([]byte, bool, error) {
			b, err := os.ReadFile(n)
			if len(b) > MaxBundleEntry {
				return b[:MaxBundleEntry], true, err
			}
			return b, false, err
		}})
	}
	return out
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeBundle collects entries into a tar.gz written to w, at most
// maxBytes of it: an entry that would not fit is left out, and
// errors.txt (always written, last) names every entry that failed, was
// cut or left out. It fails only when w does (the reader went away).
func writeBundle(ctx context.Context, w io.Writer, entries []bundleEntry, now time.Time, maxBytes int64) error {
	cw := &countingWriter{w: w}
	gz := gzip.NewWriter(cw)
	tw := tar.NewWriter(gz)
	var problems []string
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		return gz.Flush() // so that cw counts what the entry took
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		data, truncated, err := e.collect(ctx)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", e.name, err))
			if len(data) == 0 {
				continue
			}
		}
		if truncated {
			problems = append(problems, fmt.Sprintf("%s: cut at %d bytes", e.name, len(data)))
		}
		// the entry is compressed, so this is the most it can take
		if cw.n+int64(len(data))+1024 > maxBytes-bundleReserve {
			problems = append(problems, fmt.Sprintf("%s: left out: %d bytes would pass the bundle's bound of %d bytes", e.name, len(data), maxBytes))
			continue
		}
		if err := add(e.name, data); err != nil {
			return err
		}
	}
	var report bytes.Buffer
	if len(problems) == 0 {
		report.WriteString("every entry was collected\n")
	}
	for _, p := range problems {
		report.WriteString(p + "\n")
	}
	if err := add(BundleErrors, report.Bytes()); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
