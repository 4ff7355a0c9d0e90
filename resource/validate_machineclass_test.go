package resource

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/agent/boot"
)

// kernelArgsOfLen is n arguments that take total bytes joined with single
// spaces.
func kernelArgsOfLen(n, total int) []string {
	chars := total - (n - 1)
	args := make([]string, n)
	for i := range args {
		l := chars / n
		if i < chars%n {
			l++
		}
		args[i] = "k=" + strings.Repeat("v", l-2)
	}
	if got := len(strings.Join(args, " ")); got != total {
		panic(fmt.Sprintf("kernelArgsOfLen(%d, %d) joins to %d bytes", n, total, got))
	}
	return args
}

func TestValidateKernelArgsBounds(t *testing.T) {
	long := make([]string, 1000)
	for i := range long {
		long[i] = fmt.Sprintf("module.param%03d=%s", i, strings.Repeat("x", 48)) // 64 bytes
	}
	long[200] = "roost.debug" // past MaxKernelArgs: not checked one by one
	for _, tc := range []struct {
		name string
		args []string
		want []want
	}{
		{"budget", kernelArgsOfLen(4, MaxKernelArgsBytes), nil},
		{"budget + 1", kernelArgsOfLen(4, MaxKernelArgsBytes+1), []want{{"spec.kernelArgs",
			"4 arguments take 1025 bytes joined; at most 1024 bytes (the kernel keeps 2048, the image release, the hub and the boot loader add their own) (remove arguments or shorten them)"}}},
		{"most arguments", kernelArgsOfLen(MaxKernelArgs, MaxKernelArgs*4-1), nil},
		{"too many arguments", kernelArgsOfLen(MaxKernelArgs+1, (MaxKernelArgs+1)*4-1), []want{{"spec.kernelArgs",
			"129 arguments; at most 128 (remove arguments)"}}},
		{"longest argument", kernelArgsOfLen(1, MaxKernelArgBytes), nil},
		{"argument too long", []string{"quiet", strings.Repeat("a", MaxKernelArgBytes+1)}, []want{{"spec.kernelArgs[1]",
			"is 513 bytes, more than the limit of 512 for one argument (shorten it, or drop it)"}}},
		{"the report", long, []want{
			{"spec.kernelArgs", "1000 arguments; at most 128"},
			{"spec.kernelArgs", "1000 arguments take 64946 bytes joined; at most 1024 bytes (the kernel keeps 2048"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := validClass()
			mc.Spec.KernelArgs = tc.args
			checkViolations(t, Validate(Wrap(mc)), tc.want)
		})
	}
}

// The budget adds up to what the kernel keeps, and its parts are what
// the agent and the boot loader put on the command line.
func TestKernelCommandLineBudget(t *testing.T) {
	parts := MaxBootLoaderArgsBytes + ReleaseCmdlineBudget + MaxKernelArgsBytes + MaxHostnameArgBytes + MaxRevisionArgBytes + 4
	if parts != MaxKernelCommandLine || MaxKernelCommandLine != 2047 {
		t.Errorf("the budget's parts add up to %d, want %d", parts, MaxKernelCommandLine)
	}
	for name, got := range map[string]int{"boot loader": MaxBootLoaderArgsBytes, "release": ReleaseCmdlineBudget,
		"hostname": MaxHostnameArgBytes, "revision": MaxRevisionArgBytes} {
		if want := map[string]int{"boot loader": 90, "release": 625, "hostname": 270, "revision": 34}[name]; got != want {
			t.Errorf("%s: %d bytes, the docs say %d", name, got, want)
		}
	}
	if n := len(fmt.Sprintf("%s=%d", boot.RevisionArg, int64(math.MaxInt64))); n != MaxRevisionArgBytes {
		t.Errorf("the largest roost.revision=N is %d bytes, MaxRevisionArgBytes %d", n, MaxRevisionArgBytes)
	}
	sha := strings.Repeat("f", 64)
	for _, n := range []int64{1, 42, math.MaxInt64} {
		// what systemd-boot puts before the options of the agent's entry
		loader := "initrd=" + boot.ContentDir(sha) + "/" + boot.InitrdName + " initrd=" + boot.RevisionDir(n) + "/" + boot.ConfigInitrdName + " "
		if got := BootLoaderArgs(n); got != len(loader) {
			t.Errorf("BootLoaderArgs(%d) = %d, want %d (%q)", n, got, len(loader), loader)
		}
	}
	if BootLoaderArgs(math.MaxInt64) != MaxBootLoaderArgsBytes+1 {
		t.Errorf("BootLoaderArgs(max) = %d, MaxBootLoaderArgsBytes %d (+ a space)", BootLoaderArgs(math.MaxInt64), MaxBootLoaderArgsBytes)
	}
}

func TestValidateBootAssessmentTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		want []want
	}{
		{"shortest", MinBootAssessmentTimeout, nil},
		{"longest", MaxBootAssessmentTimeout, nil},
		{"too short", 10 * time.Second, []want{{"spec.bootAssessmentTimeout", "must be at least 30s, got 10s"}}},
		{"too long", 2 * time.Hour, []want{{"spec.bootAssessmentTimeout", "must be at most 1h, got 2h"}}},
		{"zero", 0, []want{{"spec.bootAssessmentTimeout", "must be > 0, got 0s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := validClass()
			mc.Spec.BootAssessmentTimeout = durationpb.New(tc.d)
			checkViolations(t, Validate(Wrap(mc)), tc.want)
		})
	}
}
