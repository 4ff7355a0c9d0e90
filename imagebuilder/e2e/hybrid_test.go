package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/imagebuilder/iso"
)

// TestISOBootsFromDisk boots an ISO of the testbed's kernel and initrd
// attached as a hard disk (as a USB stick is), not as a CD: under SeaBIOS
// the isohybrid MBR must start isolinux, under OVMF the firmware must find
// GRUB on the 0xEF partition over the El Torito EFI image. It stops once
// the kernel runs with the image's command line and has its initrd;
// enrollment is TestEnrollmentImageBoots's part.
//
// Run: make testbed && ROOST_E2E=1 go test -v -run TestISOBootsFromDisk ./imagebuilder/e2e/
func TestISOBootsFromDisk(t *testing.T) {
	if os.Getenv("ROOST_E2E") == "" {
		t.Skip("set ROOST_E2E=1 (QEMU boots take minutes)")
	}
	bundle := os.Getenv("ROOST_TESTBED_BUNDLE")
	if bundle == "" {
		bundle = repoPath("_output", "testbed", "bundle")
	}
	if _, err := os.Stat(filepath.Join(bundle, "vmlinuz")); err != nil {
		t.Fatalf("no testbed bundle (make testbed): %v", err)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal("qemu-system-x86_64 missing (images/deps.sh --e2e)")
	}
	for _, fw := range firmwares {
		t.Run(fw.name, func(t *testing.T) {
			fwArgs := fw.args(t)
			img := filepath.Join(t.TempDir(), "usb.iso")
			const marker = "roost.hybridtest=" // on the kernel command line
			err := iso.Build(iso.Spec{
				Format: iso.FormatISO, Kernel: filepath.Join(bundle, "vmlinuz"), Initrd: filepath.Join(bundle, "initrd.img"),
				Config: []byte(`{"ignition":{"version":"3.3.0"}}`), Cmdline: []string{marker + fw.name},
			}, img)
			if err != nil {
				t.Fatal(err)
			}
			console := filepath.Join(t.TempDir(), "console.log")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"-m", "1536", "-smp", "1", "-nographic", "-no-reboot", "-nic", "none",
				"-monitor", "none", "-serial", "file:" + console,
				"-drive", "file=" + img + ",format=raw,if=ide,media=disk"}, fwArgs...)
			vm := exec.CommandContext(ctx, qemu, args...)
			vm.Stdout, vm.Stderr = os.Stderr, os.Stderr
			start := time.Now()
			if err := vm.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); _ = vm.Wait() }()
			defer func() {
				if t.Failed() {
					data, _ := os.ReadFile(console)
					t.Logf("console:\n%s", tail(string(data), 6000))
				}
			}()
			con := func() string { d, _ := os.ReadFile(console); return string(d) }
			waitFor(t, 5*time.Minute, "the kernel with the image's command line", func() bool {
				return strings.Contains(con(), "Linux version") && strings.Contains(con(), marker+fw.name)
			})
			t.Logf("%s: kernel after %s", fw.name, time.Since(start).Round(time.Second))
			waitFor(t, 5*time.Minute, "the initrd", func() bool { return strings.Contains(con(), "Freeing initrd memory") })
			t.Logf("%s: initrd after %s", fw.name, time.Since(start).Round(time.Second))
		})
	}
}
