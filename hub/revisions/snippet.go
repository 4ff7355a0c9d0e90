package revisions

import (
	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/resource"
)

// A MachineClass's snippets (spec.containerLinuxConfig, then
// spec.ignition; resource.MachineClassSnippets) are merged into the
// Ignition config of every Revision of the class, under the same
// allow-list as the enrollment image's --user-config
// (ignition.CheckSnippet), and may not write anything the hub renders
// (ignition.RevisionReserved). The hub validates them at apply
// (resource.Validate); Render checks them again, so a class stored by an
// older hub cannot render a Revision that overrides the hub's own files.
//
// The class spec is part of Inputs.Hash, so a change of a snippet renders
// new Revisions, which roll out by reboot; a class without snippets hashes
// as before they existed (proto3 leaves empty strings out).

// addClassSnippets sets p's Snippets to in's MachineClass's, each named
// "MachineClass NAME spec.FIELD" in errors, and reserves for them what
// the hub renders.
func addClassSnippets(p *ignition.Params, in Inputs) {
	name := in.MachineClass.GetMetadata().GetName()
	for _, s := range resource.MachineClassSnippets(in.MachineClass.GetSpec()) {
		s.Name = "MachineClass " + name + " " + s.Name
		p.Snippets = append(p.Snippets, s)
	}
	p.Reserved = ignition.RevisionReserved()
}
