package state

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

// The extension catalog. An Extension (one version of a signed
// systemd-sysext image, named resource.ExtensionObjectName(name, version))
// is written by an ApplyObjects command (roostctl extension push) and is
// immutable once recorded: the same name and version with another image,
// manifest or signature is refused, the very same one again changes
// nothing. Under RulesExtensions the FSM checks, for every Extension of a
// command, what resource.Validate checks (syntax, the manifest describes
// the object) and, once a release key is trusted, that one signed its
// manifest. A MachineClass names Extensions in spec.extensions ("NAME",
// the newest version; "NAME=VERSION"); every apply that changes what a
// class resolves to (the class, a Pool moving to it, a new version of an
// extension it follows) is refused when an extension is unknown, two
// ship the same path, or one is built for another architecture than a
// Server a Machine of the class runs on; and an Extension a class
// resolves to cannot be deleted. The revision controller resolves the
// classes the same way (ResolveExtensions, CheckExtensionSet).

const kindExtension = "Extension"

// noTrustedKeyExtensionWarning is the warning of an Extension recorded
// while no release key is trusted.
const noTrustedKeyExtensionWarning = "no release key is trusted, so the hub recorded %s without checking its signature " +
	"(agents still check it with their own keys): trust the signing key with 'roostctl image trust add KEY.pub'"

// pushHint is how to make an extension the hub does not hold.
const pushHint = "push it first: roostctl extension push NAME-VERSION.raw (roost-image sysext builds one)"

// checkExtensionPuts checks the Extensions of an ApplyObjects command
// before anything is written (see above): under rules older than
// RulesExtensions an Extension is refused as a kind the members do not
// know (InvalidArgument); else each must pass resource.Validate
// (InvalidArgument, fields "objects[I]...."), be signed by a trusted key
// when one is trusted (FailedPrecondition naming the extension and the
// key its manifest names) and be the stored one when its name is taken
// (FailedPrecondition: Extensions are immutable). While no key is
// trusted, a warning says the signature was not checked. It also returns
// what the stored MachineClasses and Pools of the command resolve their
// extensions from before the command (extensionInputs), for
// checkExtensionUse.
func (a *applier) checkExtensionPuts(c *roostv1.ApplyObjects) (map[string]string, *apierror.Error) {
	var keys []ed25519.PublicKey
	keysRead := false
	before := map[string]string{}
	for i, o := range c.GetObjects() {
		if r, k := resource.Unwrap(o); r != nil && (k.Name == kindPool || k.Name == "MachineClass") {
			raw, err := a.txn.First(k.Name, indexID, r.GetMetadata().GetName())
			if err != nil {
				return nil, internal(err)
			}
			if raw != nil {
				before[refKey(k.Name, r.GetMetadata().GetName())] = extensionInputs(raw.(*roostv1.Object))
			}
		}
		x := o.GetExtension()
		if x == nil {
			continue
		}
		field := fmt.Sprintf("objects[%d]", i)
		if a.rules < RulesExtensions {
			return nil, apierror.Invalid("invalid objects", apierror.Violation{Field: field,
				Message: fmt.Sprintf("has no kind this hub's apply rules (version %d) know: Extensions need version %d", a.rules, RulesExtensions),
				Hint:    "run a roost-hub that knows Extensions on every member"})
		}
		if vs := resource.Validate(o); len(vs) > 0 {
			for j := range vs {
				vs[j].Field = field + "." + vs[j].Field
			}
			return nil, apierror.Invalid("invalid Extension", vs...)
		}
		spec := x.GetSpec()
		ext := releasesig.FromExtension(spec)
		raw, err := a.txn.First(kindExtension, indexID, x.GetMetadata().GetName())
		if err != nil {
			return nil, internal(err)
		}
		if raw != nil {
			old := raw.(*roostv1.Object).GetExtension().GetSpec()
			if old.GetName() != spec.GetName() || old.GetVersion() != spec.GetVersion() {
				return nil, apierror.FailedPrecondition("extension %s %s and the recorded extension %s %s share the Extension name %s: "+
					"give the new one a name or version that differs in more than case and separators (. _ + ~ -)",
					spec.GetName(), spec.GetVersion(), old.GetName(), old.GetVersion(), x.GetMetadata().GetName())
			}
			if !proto.Equal(old, spec) {
				return nil, apierror.FailedPrecondition("Extension %s (%s) is recorded with another image (sha256 %s, %d bytes), manifest or signature; "+
					"extensions are immutable: build it under a new version (roost-image sysext --version) and push that",
					x.GetMetadata().GetName(), ext, old.GetImage().GetSha256(), old.GetImage().GetSize())
			}
		}
		if !keysRead {
			if keys, err = a.trustedKeys(); err != nil {
				return nil, internal(err)
			}
			keysRead = true
		}
		if len(keys) == 0 {
			a.warnings = append(a.warnings, fmt.Sprintf(noTrustedKeyExtensionWarning, ext))
			continue
		}
		if err := releasesig.VerifyExtension(ext, keys); err != nil {
			return nil, extensionSignatureError(field, ext, spec.GetManifest(), err)
		}
	}
	return before, nil
}

// extensionInputs is what a Pool (its spec.machineClass) or a
// MachineClass (its spec.extensions) contributes to what its Machines'
// extensions resolve to.
func extensionInputs(o *roostv1.Object) string {
	if p := o.GetPool(); p != nil {
		return p.GetSpec().GetMachineClass()
	}
	return strings.Join(o.GetMachineClass().GetSpec().GetExtensions(), "\n")
}

// extensionSignatureError is the error of an Extension whose signature
// does not verify with the trusted keys: FailedPrecondition naming the
// key its manifest says signed it, or InvalidArgument for a malformed
// signature or a manifest that does not describe the extension.
func extensionSignatureError(field string, ext releasesig.Extension, manifest []byte, err error) *apierror.Error {
	switch {
	case errors.Is(err, releasesig.ErrUntrusted):
		signer := "a key the hub does not trust"
		if m, perr := releasesig.ParseExtensionManifest(manifest); perr == nil && IsKeyID(m.KeyID) {
			signer = "key " + m.KeyID + " (the keyID in its manifest), unless the manifest or the signature was altered"
		}
		return apierror.FailedPrecondition("%s is not signed by a trusted release key: it names %s. "+
			"Trust the signing key with 'roostctl image trust add KEY.pub' ('roostctl image trust list' lists the trusted ones), "+
			"or sign the extension with a trusted key (roost-image sysext --key)", ext, signer)
	case errors.Is(err, releasesig.ErrMalformedSignature):
		return apierror.Invalid("invalid Extension", apierror.Violation{Field: field + ".spec.signature", Message: err.Error(),
			Hint: "send the content of the .manifest.json.sig file"})
	}
	return apierror.Invalid("invalid Extension", apierror.Violation{Field: field + ".spec.manifest", Message: err.Error(),
		Hint: "send the .manifest.json file verbatim"})
}

// trustedKeys returns the trusted release keys in the transaction.
func (a *applier) trustedKeys() ([]ed25519.PublicKey, error) {
	it, err := a.txn.Get(tableTrustedKeys, indexID)
	if err != nil {
		return nil, err
	}
	var keys []ed25519.PublicKey
	for raw := it.Next(); raw != nil; raw = it.Next() {
		pub, err := releasesig.ParsePublicKeyPEM([]byte(raw.(*roostv1.TrustedKey).GetPublicKeyPem()))
		if err != nil {
			return nil, err // putTrustedKey checked it
		}
		keys = append(keys, pub)
	}
	return keys, nil
}

// ---- what MachineClasses resolve to

// ExtensionRefError is why a MachineClass's spec.extensions item (Index,
// Ref) cannot be resolved or used.
type ExtensionRefError struct {
	Index   int
	Ref     string
	Message string
	Hint    string
}

func (e *ExtensionRefError) Error() string {
	if e.Ref == AgentExtension+AgentExtensionImplied {
		return fmt.Sprintf("the agent extension %s: %s", AgentExtension, e.Message)
	}
	return fmt.Sprintf("spec.extensions[%d] %q: %s", e.Index, e.Ref, e.Message)
}

// AgentExtension is the name of the system extension that ships
// /usr/bin/roost-agent. Every Revision runs one (ClassExtensionRefs), so
// an installed Machine gets its agent from its Revision, not from the OS
// image, and a stock immutable OS needs nothing of Roost's.
const AgentExtension = "roost-agent"

// AgentExtensionImplied marks the item ClassExtensionRefs adds for the
// agent extension ("roost-agent" + this), which ResolveExtensions reads
// as "roost-agent" and errors name as the agent extension.
const AgentExtensionImplied = " (implied)"

// ClassExtensionRefs is what a MachineClass's Machines run: refs, its
// spec.extensions, and, unless refs name the agent extension themselves
// ("roost-agent=VERSION" pins one), the newest pushed roost-agent as a
// last item when all holds one. With no agent extension pushed, refs
// alone: the OS image must then ship /usr/bin/roost-agent.
func ClassExtensionRefs(refs []string, all []*roostv1.Extension) []string {
	for _, ref := range refs {
		if name, _, err := resource.ParseExtensionRef(ref); err == nil && name == AgentExtension {
			return refs
		}
	}
	for _, x := range all {
		if x.GetSpec().GetName() == AgentExtension {
			return append(append([]string(nil), refs...), AgentExtension+AgentExtensionImplied)
		}
	}
	return refs
}

// ResolveExtensions resolves refs, a MachineClass's spec.extensions,
// against all, every Extension: "NAME" is the newest version of NAME
// (resource.CompareExtensionVersions), "NAME=VERSION" that version. The result is
// sorted by extension name (the order systemd-sysext merges them in),
// with the index into refs of each. The error is an *ExtensionRefError
// for the first item that names no Extension (or does not parse).
func ResolveExtensions(all []*roostv1.Extension, refs []string) ([]*roostv1.Extension, []int, error) {
	out := make([]*roostv1.Extension, 0, len(refs))
	idx := make([]int, 0, len(refs))
	for i, ref := range refs {
		name, version, err := resource.ParseExtensionRef(strings.TrimSuffix(ref, AgentExtensionImplied))
		if err != nil {
			return nil, nil, &ExtensionRefError{Index: i, Ref: ref, Message: err.Error()}
		}
		var pick *roostv1.Extension
		for _, x := range all {
			s := x.GetSpec()
			switch {
			case s.GetName() != name:
			case version != "":
				if s.GetVersion() == version {
					pick = x
				}
			case pick == nil || resource.CompareExtensionVersions(s.GetVersion(), pick.GetSpec().GetVersion()) > 0:
				pick = x
			}
		}
		if pick == nil {
			msg := fmt.Sprintf("no Extension %s is pushed", name)
			if version != "" {
				msg = fmt.Sprintf("no Extension %s has version %s", name, version)
				if vs := extensionVersions(all, name); len(vs) > 0 {
					msg += " (pushed: " + strings.Join(vs, ", ") + ")"
				}
			}
			return nil, nil, &ExtensionRefError{Index: i, Ref: ref, Message: msg, Hint: pushHint}
		}
		out = append(out, pick)
		idx = append(idx, i)
	}
	sort.Sort(byExtensionName{out, idx})
	return out, idx, nil
}

// byExtensionName sorts resolved extensions and their ref indexes.
type byExtensionName struct {
	x   []*roostv1.Extension
	idx []int
}

func (s byExtensionName) Len() int { return len(s.x) }
func (s byExtensionName) Less(i, j int) bool {
	return s.x[i].GetSpec().GetName() < s.x[j].GetSpec().GetName()
}
func (s byExtensionName) Swap(i, j int) {
	s.x[i], s.x[j] = s.x[j], s.x[i]
	s.idx[i], s.idx[j] = s.idx[j], s.idx[i]
}

// extensionVersions lists the pushed versions of extension name, oldest
// first.
func extensionVersions(all []*roostv1.Extension, name string) []string {
	var vs []string
	for _, x := range all {
		if x.GetSpec().GetName() == name {
			vs = append(vs, x.GetSpec().GetVersion())
		}
	}
	sort.Slice(vs, func(i, j int) bool { return resource.CompareExtensionVersions(vs[i], vs[j]) < 0 })
	return vs
}

// ServerArchitecture is the architecture of srv in systemd's words
// ("x86-64"): its roost.io/arch label (Go's name, from inventory) mapped
// by resource.ExtensionArchitecture, x86-64 when it has none.
func ServerArchitecture(srv *roostv1.Server) string {
	return resource.ExtensionArchitecture(srv.GetMetadata().GetLabels()[LabelArch])
}

// CheckExtensionSet checks that exts, resolved as ResolveExtensions
// returns them (refIdx their indexes into refs), can be merged together
// on a Server of architecture arch (systemd's name; "" skips the check):
// each is built for arch or for any, and no two ship the same path. The
// error is an *ExtensionRefError for the item of the (later) offending
// extension.
func CheckExtensionSet(exts []*roostv1.Extension, refIdx []int, refs []string, arch string) error {
	if re := checkExtensionArch(exts, refIdx, refs, arch); re != nil {
		return re
	}
	if re := checkExtensionPaths(exts, refIdx, refs); re != nil {
		return re
	}
	return nil
}

// checkExtensionArch is CheckExtensionSet's architecture check.
func checkExtensionArch(exts []*roostv1.Extension, refIdx []int, refs []string, arch string) *ExtensionRefError {
	for i, x := range exts {
		s := x.GetSpec()
		if a := s.GetArchitecture(); arch != "" && a != "" && a != arch {
			return &ExtensionRefError{Index: refIdx[i], Ref: refs[refIdx[i]],
				Message: fmt.Sprintf("Extension %s (%s %s) is built for %s, not %s", x.GetMetadata().GetName(), s.GetName(), s.GetVersion(), a, arch),
				Hint:    fmt.Sprintf("push a build of %s for %s and name its version, or leave it out of classes for %s Servers", s.GetName(), arch, arch)}
		}
	}
	return nil
}

// checkExtensionPaths is CheckExtensionSet's check that no two extensions
// ship the same path.
func checkExtensionPaths(exts []*roostv1.Extension, refIdx []int, refs []string) *ExtensionRefError {
	owner := map[string]int{}
	for i, x := range exts {
		s := x.GetSpec()
		for _, p := range s.GetPaths() {
			j, taken := owner[p]
			if !taken {
				owner[p] = i
				continue
			}
			o := exts[j].GetSpec()
			return &ExtensionRefError{Index: refIdx[i], Ref: refs[refIdx[i]],
				Message: fmt.Sprintf("extensions %s %s and %s %s both ship %s; systemd-sysext would merge only one of them",
					o.GetName(), o.GetVersion(), s.GetName(), s.GetVersion(), p),
				Hint: "leave one of them out of the class, or build them so that each file is in one extension"}
		}
	}
	return nil
}

// ---- the checks of an apply (RulesExtensions)

// extensionList returns every Extension in txn, by name.
func extensionList(txn *memdb.Txn) ([]*roostv1.Extension, error) {
	it, err := txn.Get(kindExtension, indexID)
	if err != nil {
		return nil, err
	}
	var out []*roostv1.Extension
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*roostv1.Object).GetExtension())
	}
	return out, nil
}

// classUse is a Machine of a MachineClass that runs on a Server.
type classUse struct {
	machine, server, arch, label string
}

// classMachines returns the Machines that run with MachineClass class
// (the Machines of the Pools naming it, and standalone Machines naming it)
// and have a Server, with the Server's architecture; by Machine name.
// pool, when not "", limits them to that Pool's Machines.
func classMachines(txn *memdb.Txn, class, pool string) ([]classUse, error) {
	var machines []*roostv1.Machine
	pools := map[string]bool{}
	it, err := txn.Get(kindPool, indexRefs, refKey("MachineClass", class))
	if err != nil {
		return nil, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if p := raw.(*roostv1.Object).GetPool(); p.GetSpec().GetMachineClass() == class {
			pools[p.GetMetadata().GetName()] = true
		}
	}
	if pool != "" {
		pools = map[string]bool{pool: true}
	}
	for p := range pools {
		it, err := txn.Get(kindMachine, indexRefs, refKey(kindPool, p))
		if err != nil {
			return nil, err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if m := raw.(*roostv1.Object).GetMachine(); m.GetSpec().GetPool() == p {
				machines = append(machines, m)
			}
		}
	}
	if pool == "" {
		it, err := txn.Get(kindMachine, indexRefs, refKey("MachineClass", class))
		if err != nil {
			return nil, err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if m := raw.(*roostv1.Object).GetMachine(); m.GetSpec().GetPool() == "" && m.GetSpec().GetMachineClass() == class {
				machines = append(machines, m)
			}
		}
	}
	var out []classUse
	for _, m := range machines {
		if m.GetSpec().GetServer() == "" || m.GetStatus().GetPhase() == PhaseDestroyed {
			continue
		}
		raw, err := txn.First(kindServer, indexID, m.GetSpec().GetServer())
		if err != nil {
			return nil, err
		}
		if raw == nil {
			continue
		}
		srv := raw.(*roostv1.Object).GetServer()
		out = append(out, classUse{machine: m.GetMetadata().GetName(), server: m.GetSpec().GetServer(),
			arch: ServerArchitecture(srv), label: srv.GetMetadata().GetLabels()[LabelArch]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].machine < out[j].machine })
	return out, nil
}

// checkClassExtensions resolves class's spec.extensions in txn and checks
// them for the Servers of its Machines (of Pool pool only, when not "").
// It returns nil, or the first problem.
func checkClassExtensions(txn *memdb.Txn, all []*roostv1.Extension, class *roostv1.MachineClass, pool string) (*ExtensionRefError, error) {
	refs := class.GetSpec().GetExtensions()
	if len(refs) == 0 {
		return nil, nil
	}
	exts, idx, err := ResolveExtensions(all, refs)
	if err != nil {
		var re *ExtensionRefError
		if errors.As(err, &re) {
			return re, nil
		}
		return nil, err
	}
	if re := checkExtensionPaths(exts, idx, refs); re != nil {
		return re, nil
	}
	uses, err := classMachines(txn, class.GetMetadata().GetName(), pool)
	if err != nil {
		return nil, err
	}
	var first *ExtensionRefError
	var firstUse classUse
	n := 0
	for _, u := range uses {
		if re := checkExtensionArch(exts, idx, refs, u.arch); re != nil {
			if first == nil {
				first, firstUse = re, u
			}
			n++
		}
	}
	if first == nil {
		return nil, nil
	}
	label := "no " + LabelArch + " label, so x86-64"
	if firstUse.label != "" {
		label = LabelArch + "=" + firstUse.label
	}
	first.Message += fmt.Sprintf(", the architecture of Server %s (%s), which Machine %s runs on", firstUse.server, label, firstUse.machine)
	if n > 1 {
		first.Message += fmt.Sprintf(" (and %d more Machines)", n-1)
	}
	return first, nil
}

// checkExtensionUse runs the MachineClass checks of an apply under
// RulesExtensions, after every object of the command is in the
// transaction (final, with their results; before as checkExtensionPuts
// returned it): each MachineClass whose spec.extensions the command
// created or changed, the class of each existing Pool whose
// spec.machineClass it changed (for that Pool's Machines) and each class
// that follows (by "NAME") an extension the command created. Other
// changes are not refused for what they do not change (a Pool's replicas,
// a class's kernel arguments). A problem with an object of the command is FailedPrecondition
// with the field path objects[I].spec.extensions[J]; one a pushed
// Extension causes names the class and how to keep it.
func (a *applier) checkExtensionUse(final []*roostv1.Object, results []*roostv1.ApplyResult, before map[string]string) *apierror.Error {
	if a.rules < RulesExtensions {
		return nil
	}
	var all []*roostv1.Extension
	listed := false
	list := func() ([]*roostv1.Extension, *apierror.Error) {
		if !listed {
			var err error
			if all, err = extensionList(a.txn); err != nil {
				return nil, internal(err)
			}
			listed = true
		}
		return all, nil
	}
	var vs []apierror.Violation
	for i, o := range final {
		if results[i] == nil || results[i].GetAction() == ActionUnchanged {
			continue
		}
		if r, k := resource.Unwrap(o); k != nil && (k.Name == kindPool || k.Name == "MachineClass") {
			if was, ok := before[refKey(k.Name, r.GetMetadata().GetName())]; ok && was == extensionInputs(o) {
				continue
			}
		}
		switch {
		case o.GetMachineClass() != nil:
			if len(o.GetMachineClass().GetSpec().GetExtensions()) == 0 {
				continue
			}
			all, aerr := list()
			if aerr != nil {
				return aerr
			}
			re, err := checkClassExtensions(a.txn, all, o.GetMachineClass(), "")
			if err != nil {
				return internal(err)
			}
			if re != nil {
				vs = append(vs, apierror.Violation{Field: fmt.Sprintf("objects[%d].spec.extensions[%d]", i, re.Index), Message: re.Message, Hint: re.Hint})
			}
		case o.GetPool() != nil:
			p := o.GetPool()
			class, aerr := a.storedClass(p.GetSpec().GetMachineClass())
			if aerr != nil || class == nil || len(class.GetSpec().GetExtensions()) == 0 {
				if aerr != nil {
					return aerr
				}
				continue
			}
			all, aerr := list()
			if aerr != nil {
				return aerr
			}
			re, err := checkClassExtensions(a.txn, all, class, p.GetMetadata().GetName())
			if err != nil {
				return internal(err)
			}
			if re != nil {
				vs = append(vs, apierror.Violation{Field: fmt.Sprintf("objects[%d].spec.machineClass", i),
					Message: fmt.Sprintf("MachineClass %s's %s", class.GetMetadata().GetName(), re.Error()), Hint: re.Hint})
			}
		case o.GetExtension() != nil && results[i].GetAction() == ActionCreated:
			all, aerr := list()
			if aerr != nil {
				return aerr
			}
			if aerr := a.checkFollowers(all, o.GetExtension()); aerr != nil {
				return aerr
			}
		}
	}
	if len(vs) > 0 {
		msg := "MachineClass extensions that cannot be used"
		if len(vs) == 1 {
			msg = vs[0].Message
		}
		return apierror.FailedPreconditionFields(msg, vs...)
	}
	return nil
}

// storedClass returns MachineClass name from the transaction, or nil.
func (a *applier) storedClass(name string) (*roostv1.MachineClass, *apierror.Error) {
	if name == "" {
		return nil, nil
	}
	raw, err := a.txn.First("MachineClass", indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetMachineClass(), nil
}

// checkFollowers refuses a new Extension x that the MachineClasses
// following its name ("NAME") would resolve to but could not use.
func (a *applier) checkFollowers(all []*roostv1.Extension, x *roostv1.Extension) *apierror.Error {
	name := x.GetSpec().GetName()
	it, err := a.txn.Get("MachineClass", indexID)
	if err != nil {
		return internal(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		class := raw.(*roostv1.Object).GetMachineClass()
		follows := false
		for _, ref := range class.GetSpec().GetExtensions() {
			follows = follows || ref == name
		}
		if !follows {
			continue
		}
		if now, _, err := ResolveExtensions(all, []string{name}); err != nil || now[0] != x {
			continue // x is not the newest: the class keeps what it runs
		}
		re, err := checkClassExtensions(a.txn, all, class, "")
		if err != nil {
			return internal(err)
		}
		if re != nil {
			var keep string
			if vs := extensionVersions(all, name); len(vs) > 1 {
				keep = fmt.Sprintf("pin the class to the version it runs (%s=%s) first, or ", name, vs[len(vs)-2])
			}
			return apierror.FailedPrecondition("%s would be the newest %s, which MachineClass %s follows (spec.extensions[%d] %q), and then %s: %s; %sfix the extension",
				releasesig.FromExtension(x.GetSpec()), name, class.GetMetadata().GetName(), indexOf(class.GetSpec().GetExtensions(), name), name,
				strings.TrimPrefix(re.Error(), fmt.Sprintf("spec.extensions[%d] %q: ", re.Index, re.Ref)), re.Hint, keep)
		}
	}
	return nil
}

// checkLastAgentDelete refuses (RulesAgentExtension) to delete x when it
// is the last agent extension while a MachineClass exists: every class's
// Revisions run it (ClassExtensionRefs), and without one they would boot
// an OS that may have no agent, which nothing could then reach.
func (a *applier) checkLastAgentDelete(x *roostv1.Extension, all []*roostv1.Extension) *apierror.Error {
	if a.rules < RulesAgentExtension || x.GetSpec().GetName() != AgentExtension {
		return nil
	}
	for _, o := range all {
		if o != x && o.GetSpec().GetName() == AgentExtension {
			return nil
		}
	}
	class, err := a.txn.First("MachineClass", indexID)
	if err != nil {
		return internal(err)
	}
	if class == nil {
		return nil
	}
	return apierror.FailedPrecondition("Extension %s (%s) is the last %s: the Revisions of every MachineClass run it, and without it "+
		"Machines would boot without an agent unless their OS ships one. Push another version first (roostctl extension push)",
		x.GetMetadata().GetName(), releasesig.FromExtension(x.GetSpec()), AgentExtension)
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// checkExtensionDelete refuses to delete Extension name while a
// MachineClass resolves to it (FailedPrecondition naming the classes and
// their items); under rules older than RulesExtensions the kind is
// unknown (InvalidArgument), as on the members implementing them.
// Revisions that pin it do not keep it: they carry what their agents
// need, and the blob garbage collection keeps its image for them.
func (a *applier) checkExtensionDelete(name string) *apierror.Error {
	if a.rules < RulesExtensions {
		msg := fmt.Sprintf("unknown kind %q under apply rules version %d", kindExtension, a.rules)
		return apierror.Invalid(msg, apierror.Violation{Field: "kind", Message: msg})
	}
	raw, err := a.txn.First(kindExtension, indexID, name)
	if err != nil {
		return internal(err)
	}
	if raw == nil {
		return nil // deleteObject says NotFound
	}
	x := raw.(*roostv1.Object).GetExtension()
	all, err := extensionList(a.txn)
	if err != nil {
		return internal(err)
	}
	var users []string
	it, err := a.txn.Get("MachineClass", indexID)
	if err != nil {
		return internal(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		class := raw.(*roostv1.Object).GetMachineClass()
		for i, ref := range class.GetSpec().GetExtensions() {
			n, v, err := resource.ParseExtensionRef(ref)
			if err != nil || n != x.GetSpec().GetName() {
				continue
			}
			exts, _, err := ResolveExtensions(all, []string{ref})
			if err == nil && exts[0] == x {
				how := "the newest " + n
				if v != "" {
					how = "pinned"
				}
				users = append(users, fmt.Sprintf("MachineClass %q (spec.extensions[%d] %q: %s)", class.GetMetadata().GetName(), i, ref, how))
			}
		}
	}
	if len(users) == 0 {
		return a.checkLastAgentDelete(x, all)
	}
	return apierror.FailedPrecondition("Extension %s (%s) is used by %s: name another version in those classes first (%s=VERSION), "+
		"or take it out of their spec.extensions (roostctl apply)", name, releasesig.FromExtension(x.GetSpec()), fewNames(users), x.GetSpec().GetName())
}
