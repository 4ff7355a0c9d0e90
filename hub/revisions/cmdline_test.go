package revisions

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/roostfleet/roost/agent/boot"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// bootedCommandLine is the command line Revision spec boots with: what
// systemd-boot puts before the options of the agent's boot entry (an
// initrd= argument per initrd line), then the options (agent/boot:
// spec.kernelArgs, then roost.revision=N).
func bootedCommandLine(spec *roostv1.RevisionSpec) string {
	n := spec.GetNumber()
	return "initrd=" + boot.ContentDir(spec.GetInitrd().GetSha256()) + "/" + boot.InitrdName +
		" initrd=" + boot.RevisionDir(n) + "/" + boot.ConfigInitrdName + " " +
		strings.Join(append(append([]string(nil), spec.GetKernelArgs()...), fmt.Sprintf("%s=%d", boot.RevisionArg, n)), " ")
}

// padRelease is in's release with its cmdline padded by one more
// argument, so that Revision n's booted command line takes total bytes.
func padRelease(t *testing.T, in Inputs, n int64, total int) *roostv1.ImageRelease {
	t.Helper()
	base := len(bootedCommandLine(mustRender(t, in, n)))
	pad := total - base - 1 // the padding argument and its space
	if pad < 3 {
		t.Fatalf("command line already %d bytes", base)
	}
	return testRelease(in.Release.GetMetadata().GetName(), []string{"console=ttyS1,115200", "quiet", "p=" + strings.Repeat("x", pad-2)})
}

// A Revision renders up to the kernel's COMMAND_LINE_SIZE and not a byte
// beyond.
func TestRenderCommandLineLimit(t *testing.T) {
	const n = 7
	in := fullInputs()
	in.Release = padRelease(t, in, n, resource.MaxKernelCommandLine)
	spec := mustRender(t, in, n)
	if got := len(bootedCommandLine(spec)); got != resource.MaxKernelCommandLine {
		t.Fatalf("booted command line is %d bytes, want %d", got, resource.MaxKernelCommandLine)
	}
	if last := spec.KernelArgs[len(spec.KernelArgs)-1]; last != "systemd.hostname=workers-abcde" {
		t.Errorf("last argument %q", last)
	}

	in.Release = padRelease(t, fullInputs(), n, resource.MaxKernelCommandLine+1)
	_, err := Render(in, n)
	if err == nil {
		t.Fatal("a 2048-byte command line rendered")
	}
	for _, want := range []string{
		"the kernel command line would be 2048 bytes, more than the 2047 the kernel keeps, which would cut off systemd.hostname=workers-abcde and roost.revision=7 at its end: ",
		"ImageRelease 2026.11.0's cmdline takes 1911 bytes (budget 625), MachineClass standard's spec.kernelArgs 15 (at most 1024), the hub's, the agent's and the boot loader's arguments 122; ",
		"use a release whose cmdline takes at most 625 bytes, or shorten spec.kernelArgs of MachineClass standard",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
}

// The budget holds: the longest valid MachineClass kernelArgs, a release
// cmdline of its whole budget, the longest host name and the largest
// Revision number fit.
func TestRenderCommandLineBudget(t *testing.T) {
	in := fullInputs()
	label := strings.Repeat("h", 63)
	in.Machine.Spec.Hostname = strings.Join([]string{label, label, label, label[:61]}, ".") // 253 bytes
	in.MachineClass.Spec.KernelArgs = []string{"a=" + strings.Repeat("x", resource.MaxKernelArgBytes-2), "b=" + strings.Repeat("y", resource.MaxKernelArgsBytes-resource.MaxKernelArgBytes-3)}
	in.Release = testRelease("2026.11.0", []string{"r=" + strings.Repeat("z", resource.ReleaseCmdlineBudget-2)})
	mc := &roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: in.MachineClass.Spec}
	if vs := resource.Validate(resource.Wrap(mc)); vs != nil {
		t.Fatalf("the class is invalid: %v", vs)
	}
	spec := mustRender(t, in, math.MaxInt64)
	if got := len(bootedCommandLine(spec)); got != resource.MaxKernelCommandLine {
		t.Errorf("booted command line is %d bytes, want exactly %d", got, resource.MaxKernelCommandLine)
	}
}

// A MachineClass stored before its kernelArgs were bounded (the report:
// 1000 arguments of 64 bytes) renders no Revision; the Machine says why.
func TestRenderRefusesOversizedCommandLine(t *testing.T) {
	in := fullInputs()
	in.MachineClass.Spec.KernelArgs = nil
	for i := range 1000 {
		in.MachineClass.Spec.KernelArgs = append(in.MachineClass.Spec.KernelArgs, fmt.Sprintf("module.param%03d=%s", i, strings.Repeat("x", 48)))
	}
	spec, _, note := plan(in, nil, "")
	if spec != nil {
		t.Fatalf("rendered %d kernel arguments", len(spec.KernelArgs))
	}
	want := "cannot render: the kernel command line would be 65147 bytes, more than the 2047 the kernel keeps, which would cut off systemd.hostname=workers-abcde and roost.revision=1 at its end: " +
		"ImageRelease 2026.11.0's cmdline takes 26 bytes (budget 625), MachineClass standard's spec.kernelArgs 64999 (at most 1024), the hub's, the agent's and the boot loader's arguments 122; " +
		"shorten spec.kernelArgs of MachineClass standard to at most 1024 bytes joined"
	if note != want {
		t.Errorf("note\n%s\nwant\n%s", note, want)
	}

	// a release over its budget, without a MachineClass
	in = standaloneInputs()
	in.Release = testRelease("2026.12.0", []string{"r=" + strings.Repeat("z", 2100)})
	if _, err := Render(in, 1); err == nil || !strings.Contains(err.Error(), "ImageRelease 2026.12.0's cmdline takes 2102 bytes (budget 625), the hub's") ||
		!strings.HasSuffix(err.Error(), "; use a release whose cmdline takes at most 625 bytes") {
		t.Errorf("Render error %v", err)
	}
}
