package resource

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	k8sres "k8s.io/apimachinery/pkg/api/resource"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Kernel arguments Roost puts on the command line itself; a MachineClass
// may not set them (see ReservedKernelArg).
const (
	// KernelArgRevision is the argument the agent appends to every boot
	// entry, roost.revision=N (agent/boot.RevisionArg): the agent reads the
	// Revision it booted back from it, so another value would make it
	// report the wrong Revision.
	KernelArgRevision = "roost.revision"
	// KernelArgHostname is the argument the hub appends to every
	// Revision's command line, systemd.hostname=<the Machine's host name>.
	KernelArgHostname = "systemd.hostname"
	// kernelArgRoostPrefix starts the arguments reserved for Roost.
	kernelArgRoostPrefix = "roost."
)

// The kernel command line budget, in bytes. Linux keeps at most
// COMMAND_LINE_SIZE bytes of its command line, the terminating NUL
// included, and drops the rest without a word: 2048 on x86 and arm64
// (arch/x86/include/asm/setup.h, arch/arm64/include/uapi/asm/setup.h).
// A Revision boots with the command line
//
//	<boot loader> <release cmdline> <MachineClass kernelArgs> systemd.hostname=<host> roost.revision=N
//
// where the boot loader's part is one initrd=<path> per initrd line of the
// agent's boot entry (systemd-boot puts them before the entry's options,
// src/boot/efi/boot.c: "add initrd= to options"), the hostname argument
// is the hub's (hub/revisions.Render) and roost.revision=N the agent's
// (agent/boot.Stage). MaxKernelArgsBytes is what is left for a
// MachineClass once everything else has room at its largest:
//
//	  90  boot loader: initrd=/roost/<16 hex digits>/initrd.img initrd=/roost/rev-<N>/config.img (MaxBootLoaderArgsBytes)
//	 625  the image release's cmdline (ReleaseCmdlineBudget; Flatcar stable's is 64, the default 35)
//	1024  MachineClass kernelArgs joined with single spaces (MaxKernelArgsBytes)
//	 270  hub: systemd.hostname=<host name of at most 253 bytes> (MaxHostnameArgBytes)
//	  34  agent: roost.revision=<N of at most 19 digits> (MaxRevisionArgBytes)
//	   4  spaces between the five parts
//	----
//	2047  MaxKernelCommandLine
//
// so the hub's systemd.hostname and the agent's roost.revision always fit
// behind a valid MachineClass unless the release's cmdline is over its
// budget; the hub refuses to render a Revision whose command line would
// not fit (hub/revisions.Render).
const (
	// KernelCommandLineSize is Linux's COMMAND_LINE_SIZE on x86 and arm64,
	// in bytes, the terminating NUL included.
	KernelCommandLineSize = 2048
	// MaxKernelCommandLine is the longest command line, in bytes, the
	// kernel keeps whole.
	MaxKernelCommandLine = KernelCommandLineSize - 1
	// MaxHostnameBytes bounds a Machine's host name: its spec.hostname
	// (at most 64, Linux's HOST_NAME_MAX) or else its name (a DNS-1123
	// subdomain, at most 253).
	MaxHostnameBytes = 253
	// maxRevisionDigits is the length of the largest Revision number
	// (an int64, ≥ 1).
	maxRevisionDigits = 19
	// MaxHostnameArgBytes bounds the hub's systemd.hostname=<host>.
	MaxHostnameArgBytes = len(KernelArgHostname+"=") + MaxHostnameBytes
	// MaxRevisionArgBytes bounds the agent's roost.revision=N.
	MaxRevisionArgBytes = len(KernelArgRevision+"=") + maxRevisionDigits
	// MaxBootLoaderArgsBytes bounds the boot loader's initrd= arguments,
	// the space between them included (see BootLoaderArgs).
	MaxBootLoaderArgsBytes = len(bootInitrdArg+" "+bootConfigArgPrefix+bootConfigArgSuffix) + maxRevisionDigits
	// MaxKernelArgsBytes bounds a MachineClass's spec.kernelArgs joined
	// with single spaces.
	MaxKernelArgsBytes = 1024
	// ReleaseCmdlineBudget is what the budget leaves for an image
	// release's own cmdline (its manifest's, or the default console
	// arguments), joined with single spaces.
	ReleaseCmdlineBudget = MaxKernelCommandLine - MaxBootLoaderArgsBytes - MaxKernelArgsBytes -
		MaxHostnameArgBytes - MaxRevisionArgBytes - 4
	// MaxKernelArgs bounds the number of a MachineClass's kernelArgs:
	// real command lines hold a few dozen arguments.
	MaxKernelArgs = 128
	// MaxKernelArgBytes bounds one of a MachineClass's kernelArgs: half
	// the budget; a longer one is a pasted file or a list that belongs in
	// the Ignition config, not a kernel argument.
	MaxKernelArgBytes = MaxKernelArgsBytes / 2
)

// The boot loader's arguments for a Revision's boot entry, as the agent
// lays the ESP out (agent/boot: ContentDir, InitrdName, RevisionDir,
// ConfigInitrdName); systemd-boot writes the paths with backslashes, of
// the same length.
const (
	bootInitrdArg       = "initrd=/roost/0123456789abcdef/initrd.img"
	bootConfigArgPrefix = "initrd=/roost/rev-"
	bootConfigArgSuffix = "/config.img"
)

// BootLoaderArgs is how many bytes the boot loader puts before the
// options of Revision revision's boot entry: its two initrd= arguments
// and a space after each.
func BootLoaderArgs(revision int64) int {
	return len(bootInitrdArg+" "+bootConfigArgPrefix+bootConfigArgSuffix+" ") + len(strconv.FormatInt(revision, 10))
}

// ReservedKernelArg says why a MachineClass may not carry kernel argument
// arg ("name" or "name=value"), or returns "" when it may: Roost sets
// roost.revision and systemd.hostname itself, and keeps every other
// roost.* name for itself.
func ReservedKernelArg(arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	switch {
	case name == KernelArgRevision:
		return "roost.revision is set by the agent: it appends roost.revision=N to each boot entry and reads the booted Revision back from it"
	case name == KernelArgHostname:
		return "systemd.hostname is set by the hub, to the Machine's host name (its spec.hostname, else its name)"
	case strings.HasPrefix(name, kernelArgRoostPrefix):
		return "kernel arguments starting with \"roost.\" are reserved for Roost"
	}
	return ""
}

// validateMachineClass: every server selector term parses (ParseRequirement);
// install disk sizes are quantities ≥ 0 with minSize ≤ maxSize; kernel
// arguments are single arguments, none that Roost sets itself
// (ReservedKernelArg), at most MaxKernelArgs of them, each at most
// MaxKernelArgBytes and all together, joined with single spaces, at most
// MaxKernelArgsBytes (only the first MaxKernelArgs are checked one by
// one); SSH keys are single OpenSSH public keys; the Ignition and
// Container Linux Config snippets pass validateSnippets; extensions are
// references (checkClassExtensions).
func validateMachineClass(e *violations, s *roostv1.MachineClassSpec) {
	for i, term := range s.GetServerSelector() {
		if _, err := ParseRequirement(term); err != nil {
			e.add(joinIndex("spec.serverSelector", i), err.Error(), "")
		}
	}
	d := s.GetInstallDisk()
	minQ := checkSize(e, "spec.installDisk.minSize", d.GetMinSize())
	maxQ := checkSize(e, "spec.installDisk.maxSize", d.GetMaxSize())
	if minQ != nil && maxQ != nil && minQ.Cmp(*maxQ) > 0 {
		e.addf("spec.installDisk.minSize", "swap the two, or raise maxSize", "must not exceed maxSize (%s > %s)", d.GetMinSize(), d.GetMaxSize())
	}
	checkKernelArgs(e, s.GetKernelArgs())
	validateSnippets(e, s)
	for i, k := range s.GetSshAuthorizedKeys() {
		f := joinIndex("spec.sshAuthorizedKeys", i)
		const hint = `paste one line of a .pub file, e.g. "ssh-ed25519 AAAAC3Nza… user@host"`
		_, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(k))
		switch {
		case err != nil:
			e.add(f, "is not an OpenSSH public key", hint)
		case strings.TrimSpace(string(rest)) != "":
			e.add(f, "holds more than one key", "give each key as its own list item")
		}
	}
	checkClassExtensions(e, s.GetExtensions())
	checkDurationRange(e, "spec.bootAssessmentTimeout", s.GetBootAssessmentTimeout(), MinBootAssessmentTimeout, MaxBootAssessmentTimeout,
		`how long a booted Revision has to become healthy before the agent reboots it (the boot loader counts the try); the default is "5m"`)
	if n := s.GetBootTries(); n != 0 && (n < MinBootTries || n > MaxBootTries) {
		e.add("spec.bootTries", fmt.Sprintf("is %d", n), fmt.Sprintf("give %d to %d boots of a new Revision before the boot loader falls back to the previous one, or leave it out for 3", MinBootTries, MaxBootTries))
	}
	switch m := s.GetCleaning().GetMode(); m {
	case "", "metadata", "discard", "zero":
	default:
		e.addf("spec.cleaning.mode", `"metadata" (default: partition tables and signatures), "discard" (the whole disk, zeros where it cannot discard) or "zero" (zeros over the whole disk)`,
			"unknown cleaning mode %q", m)
	}
}

// Bounds of a MachineClass's spec.bootTries.
const (
	MinBootTries = 1
	MaxBootTries = 10
)

// Bounds of a MachineClass's spec.bootAssessmentTimeout.
const (
	MinBootAssessmentTimeout = 30 * time.Second
	MaxBootAssessmentTimeout = time.Hour
)

// checkKernelArgs checks a MachineClass's spec.kernelArgs (see
// validateMachineClass).
func checkKernelArgs(e *violations, args []string) {
	const f = "spec.kernelArgs"
	const hint = "remove arguments or shorten them"
	if len(args) > MaxKernelArgs {
		e.addf(f, "remove arguments", "%d arguments; at most %d", len(args), MaxKernelArgs)
	}
	if n := JoinedLen(args); n > MaxKernelArgsBytes {
		e.addf(f, hint, "%d arguments take %d bytes joined; at most %d bytes (the kernel keeps %d, the image release, the hub and the boot loader add their own)",
			len(args), n, MaxKernelArgsBytes, KernelCommandLineSize)
	}
	for i, a := range args[:min(len(args), MaxKernelArgs)] {
		f := joinIndex(f, i)
		switch {
		case a == "":
			e.add(f, "is empty", "remove the item")
		case strings.ContainsAny(a, " \t\r\n"):
			e.addf(f, "give each argument as its own list item", "must be one argument without spaces, got %q", a)
		case len(a) > MaxKernelArgBytes:
			e.addf(f, "shorten it, or drop it", "is %d bytes, more than the limit of %d for one argument", len(a), MaxKernelArgBytes)
		default:
			if why := ReservedKernelArg(a); why != "" {
				e.addf(f, "remove the item", "%q: %s", a, why)
			}
		}
	}
}

// JoinedLen is len(strings.Join(args, " ")) in bytes, without joining: the
// length of a command line of args.
func JoinedLen(args []string) int {
	n := max(len(args)-1, 0)
	for _, a := range args {
		n += len(a)
	}
	return n
}

// checkSize parses an optional size quantity; it returns nil when unset or
// bad.
func checkSize(e *violations, field, s string) *k8sres.Quantity {
	if s == "" {
		return nil
	}
	q, err := k8sres.ParseQuantity(s)
	if err != nil {
		e.addf(field, `write a size such as "8Gi", "500G" or "2Ti"`, "invalid size %q", s)
		return nil
	}
	if q.Sign() < 0 {
		e.addf(field, "", "must be ≥ 0, got %q", s)
		return nil
	}
	return &q
}
