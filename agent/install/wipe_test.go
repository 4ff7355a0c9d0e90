package install

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// secret is a credential-like string planted inside STATE.
const secret = "-----BEGIN EC PRIVATE KEY----- roost-wipe-test"

// preparedDisk prepares disk "sda" of f as Roost's install disk and plants
// secret in the middle of STATE (where file data lives).
func preparedDisk(t *testing.T, f *FakeDisks) int64 {
	t.Helper()
	if _, err := Prepare(context.Background(), f, "/dev/sda", Options{DiskGUID: testGUID, ESPSize: MinESPSize}); err != nil {
		t.Fatal(err)
	}
	off := int64(1 << 30)
	file, err := os.OpenFile(f.Path("sda"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt([]byte(secret), off); err != nil {
		t.Fatal(err)
	}
	f.Log()
	return off
}

func holdsSecret(t *testing.T, path string, off int64) bool {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	b := make([]byte, len(secret))
	if _, err := file.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(b, []byte(secret))
}

// allocated is the bytes the image file uses on the host file system.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

func TestWipeModes(t *testing.T) {
	needMkfs(t)
	for _, tc := range []struct {
		mode       string
		keepSecret bool // metadata leaves file data in place (unreachable)
		line       string
	}{
		{WipeMetadata, true, "/dev/sda: metadata: partition tables and signatures zeroed (it held a Roost GPT, 2 partitions: a FAT, NTFS or exFAT file system, an ext2/3/4 file system)"},
		{WipeDiscard, false, "/dev/sda: discard: 1.1Gi discarded, partition tables and signatures zeroed (it held a Roost GPT, 2 partitions: a FAT, NTFS or exFAT file system, an ext2/3/4 file system)"},
		{WipeZero, false, "/dev/sda: zero: zeros written over 1.1Gi (it held a Roost GPT, 2 partitions: a FAT, NTFS or exFAT file system, an ext2/3/4 file system)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFake(t, map[string]int64{"sda": 1200 << 20})
			off := preparedDisk(t, f)
			line, err := Wipe(context.Background(), f, "/dev/sda", tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			if line != tc.line {
				t.Errorf("line\n got %q\nwant %q", line, tc.line)
			}
			if got := f.String(); got != "sda: 1.1Gi, 512-byte sectors, blank\nlog:\n  open-for-wipe sda\n" {
				t.Errorf("after the wipe:\n%s", got)
			}
			if got := holdsSecret(t, f.Path("sda"), off); got != tc.keepSecret {
				t.Errorf("secret still on the disk: %v, want %v", got, tc.keepSecret)
			}
			if tc.mode == WipeDiscard {
				if a := allocated(t, f.Path("sda")); a > 4<<20 {
					t.Errorf("%d bytes still allocated after the discard", a)
				}
			}
			// A Roost install disk again, from scratch.
			res, err := Prepare(context.Background(), f, "/dev/sda", Options{DiskGUID: testGUID, ESPSize: MinESPSize})
			if err != nil || len(res.Actions) == 0 {
				t.Fatalf("Prepare after the wipe: %v, %v", res, err)
			}
		})
	}
}

func TestWipeRefusals(t *testing.T) {
	f := newFake(t, map[string]int64{"sda": 64 << 20})
	f.ReadOnly = map[string]bool{"sda": true}
	_, err := Wipe(context.Background(), f, "/dev/sda", WipeMetadata)
	if !errors.Is(err, unix.EROFS) || !strings.Contains(err.Error(), "wipe /dev/sda: open /dev/sda: read-only file system") {
		t.Errorf("read-only disk: %v", err)
	}
	if _, err := Wipe(context.Background(), f, "/dev/sda", "shred"); err == nil || !strings.Contains(err.Error(), `unknown mode "shred"`) {
		t.Errorf("bad mode: %v", err)
	}
	f.ReadOnly = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Wipe(ctx, f, "/dev/sda", WipeZero); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// A disk that is not Roost's (a bare file system) loses its signature too.
func TestWipeForeignSignature(t *testing.T) {
	needMkfs(t)
	f := newFake(t, map[string]int64{"sdb": 64 << 20})
	if err := f.MkfsExt4(context.Background(), "/dev/sdb", 0, 64<<20, "data"); err != nil {
		t.Fatal(err)
	}
	line, err := Wipe(context.Background(), f, "/dev/sdb", WipeMetadata)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(line, "(it held an ext2/3/4 file system)") {
		t.Errorf("line %q", line)
	}
	if !strings.HasPrefix(f.String(), "sdb: 64Mi, 512-byte sectors, blank\n") {
		t.Errorf("after the wipe:\n%s", f.String())
	}
}

// TestWipeLoopDevice wipes a prepared Roost disk on a real block device (a
// loop device with partition scanning) by each mode: the kernel drops
// the partitions (BLKRRPART), blkid finds nothing, and zero and discard
// leave no byte of a planted secret. Needs root.
func TestWipeLoopDevice(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root (a loop device)")
	}
	needMkfs(t)
	losetup, err := lookTool("losetup")
	if err != nil {
		t.Skip(err)
	}
	for _, mode := range []string{WipeMetadata, WipeDiscard, WipeZero} {
		t.Run(mode, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "disk.img")
			if err := os.WriteFile(img, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(img, 1200<<20); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(losetup, "--find", "--show", "--partscan", img).CombinedOutput()
			if err != nil {
				t.Skipf("no loop device: %v: %s", err, out)
			}
			dev := strings.TrimSpace(string(out))
			t.Cleanup(func() {
				if out, err := exec.Command(losetup, "--detach", dev).CombinedOutput(); err != nil {
					t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
				}
			})
			ctx := context.Background()
			if _, err := Prepare(ctx, OSDisks{}, dev, Options{ESPSize: MinESPSize}); err != nil {
				t.Fatal(err)
			}
			off := int64(1 << 30)
			plant(t, dev, off)
			part := "/sys/class/block/" + filepath.Base(dev) + "p2"
			partitions := waitFor(part, true)
			line, err := Wipe(ctx, OSDisks{}, dev, mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(line)
			if partitions && !waitFor(part, false) {
				t.Errorf("%s still exists after the wipe", part)
			}
			if blkid, err := lookTool("blkid"); err == nil {
				out, err := exec.Command(blkid, "-p", dev).CombinedOutput()
				if err == nil || strings.Contains(string(out), "PTTYPE") {
					t.Errorf("blkid -p %s still finds: %s", dev, out)
				}
			}
			if got := holdsSecret(t, dev, off); got != (mode == WipeMetadata) {
				t.Errorf("secret on the device: %v", got)
			}
		})
	}
}

func plant(t *testing.T, dev string, off int64) {
	t.Helper()
	file, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt([]byte(secret), off); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits up to 5 s for path to exist (or not); it reports whether
// it did.
func waitFor(path string, exists bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(path); (err == nil) == exists {
			return true
		}
	}
	return false
}

// TestWipeReadOnlyLoopDevice: a read-only block device (losetup --read-only)
// is refused with EROFS before anything is written. Needs root.
func TestWipeReadOnlyLoopDevice(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root (a loop device)")
	}
	losetup, err := lookTool("losetup")
	if err != nil {
		t.Skip(err)
	}
	img := filepath.Join(t.TempDir(), "ro.img")
	if err := os.WriteFile(img, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(losetup, "--find", "--show", "--read-only", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(losetup, "--detach", dev).Run() })
	_, err = Wipe(context.Background(), OSDisks{}, dev, WipeZero)
	if !errors.Is(err, unix.EROFS) || !strings.Contains(err.Error(), "read-only file system") {
		t.Errorf("read-only device: %v", err)
	}
	if !holdsSecret(t, img, 0) {
		t.Error("the read-only device was written")
	}
}
