package revisions

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A MachineClass's Extensions (spec.extensions: "NAME", the newest pushed
// version, or "NAME=VERSION") are resolved for each Machine when its
// inputs are gathered (state.ResolveExtensions, the FSM's own rules) and
// checked against its Server (state.CheckExtensionSet: the Server's
// architecture, no path shipped twice). A Machine whose extensions cannot
// be resolved gets no Revision; the note says why (in the Machine's
// Provisioned condition while it waits for its first Revision, else in
// the log). Each Revision pins the resolved ones (spec.extensions, sorted
// by name: systemd-sysext's merge order) with their images' digests and
// signed manifests, and Inputs.Hash covers them, so pushing a newer
// version of an extension a class follows, or changing the class's list,
// renders a new Revision for every Machine of the class, which then rolls
// out by reboot inside the Pool's windows like any other change. The hash
// of a Machine whose class names no extension is what it was before
// extensions existed (while no agent extension is pushed).
//
// Every Revision also runs the agent extension (state.AgentExtension,
// state.ClassExtensionRefs): the newest pushed roost-agent unless the
// class pins a version of it, so pushing a new agent rolls every Pool by
// reboot inside its windows, as a new OS image does.

// extensions resolves the extensions of in's MachineClass for in's
// Server into in.Extensions, or returns a note saying why it cannot.
// Resolutions are shared per MachineClass within a step; the result is
// also kept, for the memo, as in.extensionsKey.
func (v *view) extensions(in *Inputs) string {
	if v.exts == nil {
		v.exts = map[*roostv1.MachineClass]resolved{}
		for _, o := range v.r.List("Extension") {
			v.allExts = append(v.allExts, o.GetExtension())
		}
	}
	res, ok := v.exts[in.MachineClass]
	if !ok {
		res.refs = state.ClassExtensionRefs(in.MachineClass.GetSpec().GetExtensions(), v.allExts)
		res.exts, res.idx, res.err = state.ResolveExtensions(v.allExts, res.refs)
		v.exts[in.MachineClass] = res
	}
	refs := res.refs
	if len(refs) == 0 {
		return ""
	}
	err := res.err
	if err == nil {
		err = state.CheckExtensionSet(res.exts, res.idx, refs, state.ServerArchitecture(in.Server))
	}
	if err != nil {
		note := fmt.Sprintf("MachineClass %s: %v", in.MachineClass.GetMetadata().GetName(), err)
		if re, ok := err.(*state.ExtensionRefError); ok && re.Hint != "" {
			note += " (" + re.Hint + ")"
		}
		in.extensionsKey = "!" + note
		return note
	}
	in.Extensions = res.exts
	var key strings.Builder
	for _, x := range res.exts {
		fmt.Fprintf(&key, "%s@%d,", x.GetMetadata().GetName(), x.GetMetadata().GetCreateIndex())
	}
	in.extensionsKey = key.String()
	return ""
}

// resolved is what a MachineClass's spec.extensions resolve to.
type resolved struct {
	// refs are the class's spec.extensions and the implied agent
	// extension (state.ClassExtensionRefs).
	refs []string
	exts []*roostv1.Extension
	idx  []int
	err  error
}

// revisionExtensions pins in.Extensions for a Revision, in order. It fails
// when in's MachineClass names extensions that were not resolved into
// in.Extensions (Inputs built without gathering them).
func revisionExtensions(in Inputs) ([]*roostv1.RevisionExtension, error) {
	refs := state.ClassExtensionRefs(in.MachineClass.GetSpec().GetExtensions(), in.Extensions)
	if len(refs) != len(in.Extensions) {
		return nil, fmt.Errorf("MachineClass %s names %d extensions, %d were resolved", in.MachineClass.GetMetadata().GetName(), len(refs), len(in.Extensions))
	}
	var out []*roostv1.RevisionExtension
	for _, x := range in.Extensions {
		s := x.GetSpec()
		out = append(out, &roostv1.RevisionExtension{Name: s.GetName(), Version: s.GetVersion(),
			Image: proto.Clone(s.GetImage()).(*roostv1.Artifact), Manifest: s.GetManifest(), Signature: s.GetSignature()})
	}
	return out, nil
}

// hashExtensions writes what a Revision pins of in.Extensions to h: per
// extension its name, version, image digest and size, and the digest of
// its manifest and signature. Nothing for none, so that the hash of a
// Machine without extensions stays what it was.
func hashExtensions(h hash.Hash, in Inputs) {
	for _, x := range in.Extensions {
		s := x.GetSpec()
		signed := sha256.New()
		signed.Write(s.GetManifest())
		signed.Write([]byte{0})
		signed.Write([]byte(s.GetSignature()))
		fmt.Fprintf(h, "extension %q %q %s %d %x\n", s.GetName(), s.GetVersion(), s.GetImage().GetSha256(), s.GetImage().GetSize(), signed.Sum(nil))
	}
}
