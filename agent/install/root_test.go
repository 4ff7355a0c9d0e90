package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOSDisksLoopDevice runs Prepare and InstallBootLoader through OSDisks
// on a real block device (a loop device with partition scanning): the
// kernel must see both partitions and blkid their file systems. Needs root.
func TestOSDisksLoopDevice(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root (a loop device)")
	}
	needMkfs(t)
	losetup, err := lookTool("losetup")
	if err != nil {
		t.Skip(err)
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 4<<30); err != nil {
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
	res, err := Prepare(ctx, OSDisks{}, dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("actions: %q", res.Actions)
	if err := InstallBootLoader(ctx, OSDisks{}, dev, fakeEFI(0x8664)); err != nil {
		t.Fatal(err)
	}
	if res, err := Prepare(ctx, OSDisks{}, dev, Options{}); err != nil || len(res.Actions) != 0 {
		t.Errorf("second Prepare: %v, %v; want no actions", res, err)
	}
	// The kernel's view: partitions in sysfs, file systems by blkid.
	name := filepath.Base(dev)
	sys := "/sys/class/block/" + name + "p2"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(sys); err == nil {
			break
		}
		if time.Now().After(deadline) {
			// Seen on a Firecracker guest kernel: BLKRRPART succeeds, no partitions.
			t.Logf("the kernel shows no partitions of %s (no GPT support in this kernel?); not checking them", dev)
			return
		}
	}
	for part, want := range map[string]string{"1": "2048", "2": "1050624"} {
		if b, err := os.ReadFile("/sys/class/block/" + name + "p" + part + "/start"); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%sp%s starts at %q (%v), want %s", name, part, b, err, want)
		}
	}
	blkid, err := lookTool("blkid")
	if err != nil {
		t.Skip(err)
	}
	for part, want := range map[string]string{"p1": `LABEL="ROOST-ESP"`, "p2": `LABEL="ROOST-STATE"`} {
		if _, err := os.Stat(dev + part); err != nil {
			t.Logf("no device node %s%s (no udev/devtmpfs?)", dev, part)
			continue
		}
		out, err := exec.Command(blkid, "-p", dev+part).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("blkid -p %s%s: %v: %s; want %s", dev, part, err, out, want)
		}
	}
	d, err := Describe(ctx, OSDisks{}, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + d)
}
