package resource

import (
	"strings"

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
// (ReservedKernelArg); SSH keys are single OpenSSH public keys.
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
	for i, a := range s.GetKernelArgs() {
		f := joinIndex("spec.kernelArgs", i)
		switch {
		case a == "":
			e.add(f, "is empty", "remove the item")
		case strings.ContainsAny(a, " \t\r\n"):
			e.addf(f, "give each argument as its own list item", "must be one argument without spaces, got %q", a)
		default:
			if why := ReservedKernelArg(a); why != "" {
				e.addf(f, "remove the item", "%q: %s", a, why)
			}
		}
	}
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
