package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cleaningClass is the MachineClass "e2e" cleaning released Servers by
// mode, with or without data disks.
func cleaningClass(pub, mode string, dataDisks bool) string {
	return machineClassWith(pub, fmt.Sprintf("  cleaning:\n    mode: %s\n    dataDisks: %t\n", mode, dataDisks))
}

// cleaned reports whether s's Cleaned condition holds.
func cleaned(s *Server) bool {
	for _, c := range s.Status.Conditions {
		if c.Type == "Cleaned" {
			return c.Status == "True"
		}
	}
	return false
}

func serverState(s *Server) string {
	st := fmt.Sprintf("state=%s (%s) booted=%d", s.Status.State, s.Status.StateReason, s.Status.BootedRevision)
	if c := s.Status.Cleaning; c != nil {
		st += fmt.Sprintf(" cleaning: mode=%s dataDisks=%t attempts=%d error=%q disks=%q", c.Mode, c.DataDisks, c.Attempts, c.Error, c.Disks)
	}
	return st
}

// waitCleaned waits until the Server is Available after a cleaning and
// fails if it is ever seen Available before the agent's result (the
// Cleaned condition) was recorded, or CleaningFailed.
func (j *mainJob) waitCleaned(what string, timeout time.Duration) *Server {
	j.t.Helper()
	var last *Server
	j.poll(what, timeout, func() (bool, string) {
		s, err := j.getServer()
		if err != nil {
			return false, err.Error()
		}
		last = s
		switch s.Status.State {
		case "Available":
			if !cleaned(s) || s.Status.Cleaning == nil || s.Status.Cleaning.FinishedAt == "" {
				j.fatalf("the Server is Available without a recorded cleaning result: %s", serverState(s))
			}
			return true, serverState(s)
		case "CleaningFailed":
			j.fatalf("the cleaning failed: %s", serverState(s))
		}
		return false, serverState(s)
	})
	return last
}

// diskGUID reads the GPT disk GUID of the raw image path (empty when it
// holds no GPT header at LBA 1).
func diskGUID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := make([]byte, 92)
	if _, err := f.ReadAt(h, 512); err != nil {
		return "", err
	}
	if string(h[:8]) != "EFI PART" {
		return "", nil
	}
	g := h[56:72]
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X", binary.LittleEndian.Uint32(g[0:4]), binary.LittleEndian.Uint16(g[4:6]),
		binary.LittleEndian.Uint16(g[6:8]), g[8:10], g[10:16]), nil
}

// wipeMarkers are what a Roost install leaves on its disk: GPT headers, the
// partition and file system names (GPT names are UTF-16LE), the agent's
// PEM key and certificate, boot entries.
var wipeMarkers = [][]byte{
	[]byte("EFI PART"),
	[]byte("ROOST-STATE"), []byte("ROOST-ESP"),
	utf16le("ROOST-STATE"), utf16le("ROOST-ESP"),
	[]byte("PRIVATE KEY-----"), []byte("BEGIN CERTIFICATE"),
	[]byte("roost.revision="),
}

func utf16le(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), 0)
	}
	return b
}

// checkWiped reads the raw disk image path from the host, every data
// extent of the sparse file (SEEK_DATA/SEEK_HOLE: discarded blocks are
// holes), and returns the markers it finds, with their offsets, and how
// many bytes it read.
func checkWiped(path string) (found []string, read int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	const chunk = 8 << 20
	const overlap = 64 // the longest marker, so one spanning two chunks is found
	buf := make([]byte, chunk+overlap)
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if err != nil {
			return found, read, fmt.Errorf("SEEK_DATA: %w", err)
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return found, read, fmt.Errorf("SEEK_HOLE: %w", err)
		}
		for p := data; p < hole; p += chunk {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), size-p)], p)
			if err != nil && !errors.Is(err, io.EOF) {
				return found, read, err
			}
			read += int64(min(n, chunk))
			for _, m := range wipeMarkers {
				if i := bytes.Index(buf[:n], m); i >= 0 && len(found) < 20 {
					found = append(found, fmt.Sprintf("%q at byte %d", m, p+int64(i)))
				}
			}
		}
		off = hole
	}
	return found, read, nil
}

// releaseAndClean is acceptance 1 of the cleaning (issue 20), at the end of
// the main job on its Ready server:
//
//  1. with MachineClass e2e cleaning by discard (no data disks), pool
//     unassign: the Server is Cleaning, then Available only with the
//     agent's result recorded (never Available before), booting no
//     Revision;
//  2. the test reads the VM's raw disk from the host: no GPT header, no
//     Roost partition or file system name, no PEM key or certificate, no
//     boot entry anywhere in the image's data;
//  3. assigned again, it installs from scratch (a new GPT disk GUID) and
//     is Ready;
//  4. with the class cleaning data disks, a second unassign fails on the
//     read-only data disk: CleaningFailed with the reason naming it, never
//     Available;
//  5. the class back to no data disks, 'roostctl server clean' recovers:
//     Available.
func (j *mainJob) releaseAndClean(pub string) {
	t, ctx := j.t, j.ctx
	before, err := diskGUID(j.vm.Disk)
	if err != nil || before == "" {
		j.fatalf("the install disk holds no GPT before the release (%v)", err)
	}

	// ---- 1. release: Cleaning, then Available -----------------------------
	// (the class cleans by discard, without data disks: see TestMainJob)
	step := time.Now()
	j.hub.MustCtl(t, ctx, "pool", "unassign", "demo", j.server)
	s := j.waitCleaned("Server Available after its cleaning", 10*time.Minute)
	if s.Status.BootedRevision != 0 || len(s.Status.Cleaning.Disks) != 1 || !strings.HasPrefix(s.Status.Cleaning.Disks[0], "/dev/vda: discard:") {
		j.fatalf("after the cleaning: %s; want booted revision 0 and /dev/vda discarded", serverState(s))
	}
	t.Logf("cleaned: %s", serverState(s))
	j.logTiming("unassign-to-cleaned-Available", time.Since(step))

	// ---- 2. the disk, read from the host -----------------------------------
	step = time.Now()
	found, read, err := checkWiped(j.vm.Disk)
	if err != nil {
		j.fatalf("reading the disk image: %v", err)
	}
	if len(found) > 0 {
		j.fatalf("the cleaned disk image still holds: %s", strings.Join(found, "; "))
	}
	t.Logf("disk image %s: %d MiB of data left after the discard, none of %d markers", j.vm.Disk, read>>20, len(wipeMarkers))
	j.logTiming("disk-image-check", time.Since(step))

	// ---- 3. assigned again: a fresh install --------------------------------
	step = time.Now()
	j.machine = j.assign("demo", j.server, "demo-1")
	rev := j.waitReady("Machine Ready after the reinstall", 0, 20*time.Minute)
	after, err := diskGUID(j.vm.Disk)
	if err != nil || after == "" || after == before {
		j.fatalf("after the reinstall the disk GUID is %q (%v), before the cleaning %q: want a new GPT", after, err, before)
	}
	t.Logf("reinstalled from scratch: revision %d, disk GUID %s (was %s)", rev, after, before)
	j.logTiming("reassign-to-Ready (fresh install)", time.Since(step))

	// ---- 4. a cleaning that fails: the read-only data disk -----------------
	step = time.Now()
	j.apply("machineclass-cleaning.yaml", cleaningClass(pub, "metadata", true))
	j.hub.MustCtl(t, ctx, "pool", "unassign", "demo", j.server)
	j.poll("Server CleaningFailed on the read-only data disk", 10*time.Minute, func() (bool, string) {
		s, err := j.getServer()
		if err != nil {
			return false, err.Error()
		}
		if s.Status.State == "Available" {
			j.fatalf("a cleaning that cannot wipe the read-only data disk made the Server Available: %s", serverState(s))
		}
		return s.Status.State == "CleaningFailed", serverState(s)
	})
	s, err = j.getServer()
	if err != nil {
		j.fatalf("%v", err)
	}
	if !strings.Contains(s.Status.StateReason, "/dev/vdb") || !strings.Contains(s.Status.StateReason, "read-only") {
		j.fatalf("CleaningFailed, but the reason does not name the read-only disk: %s", serverState(s))
	}
	t.Logf("failed as expected: %s", serverState(s))
	j.logTiming("unassign-to-CleaningFailed", time.Since(step))

	// ---- 5. fixed class, retry by hand: Available ---------------------------
	step = time.Now()
	j.apply("machineclass-cleaning.yaml", cleaningClass(pub, "metadata", false))
	j.hub.MustCtl(t, ctx, "server", "clean", j.server)
	s = j.waitCleaned("Server Available after 'server clean'", 10*time.Minute)
	t.Logf("recovered: %s", serverState(s))
	j.logTiming("server-clean-to-Available", time.Since(step))
}
