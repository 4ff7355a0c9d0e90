package state

import (
	"fmt"
	"maps"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// missingRefHint is the hint of a dangling-reference violation.
const missingRefHint = "create it first, or apply it in the same file"

// applyObjects creates or replaces c.Objects, all or nothing. Violations
// name fields as "objects[I]...." (I indexes c.Objects). It returns one
// result per object in command order. A Pool keeps a stored pause its
// manifest does not set, and a dropped pin is warned about (see
// applyPoolOver), as is an object that cannot do its job yet (see
// referenceWarnings); the warnings go to ApplyResult.Warnings. An
// ImageRelease put again must be the same release and keeps its channels
// (see putImageReleaseOver).
//
// An appliable object's metadata.modifyIndex and metadata.uid, when set,
// are preconditions checked against the stored object in this
// transaction (see checkPreconditions); when any fails, nothing is applied
// and the error is Aborted. The other hub-set metadata and status are
// ignored (see merge).
func (a *applier) applyObjects(c *roostv1.ApplyObjects) ([]*roostv1.ApplyResult, *apierror.Error) {
	type item struct {
		kind *resource.Kind
		in   resource.Resource
		name string
	}
	extBefore, aerr := a.checkExtensionPuts(c)
	if aerr != nil {
		return nil, aerr
	}
	objs := c.GetObjects()
	items := make([]item, len(objs))
	var bad []apierror.Violation
	first := map[string]int{} // "Kind/name" → first index
	for i, o := range objs {
		r, k := resource.Unwrap(o)
		if r == nil || k == nil {
			bad = append(bad, apierror.Violation{Field: fmt.Sprintf("objects[%d]", i), Message: "has no kind"})
			continue
		}
		name := r.GetMetadata().GetName()
		if name == "" {
			bad = append(bad, apierror.Violation{Field: fmt.Sprintf("objects[%d].metadata.name", i), Message: "is required"})
			continue
		}
		if k.Name == kindEvent {
			bad = append(bad, apierror.Violation{Field: fmt.Sprintf("objects[%d].kind", i), Message: "Events are recorded by the hub (RecordEvents), not applied"})
			continue
		}
		if (k.Name == kindReleaseFeed || k.Name == kindChannel) && a.rules < RulesReleaseFeeds {
			bad = append(bad, apierror.Violation{Field: fmt.Sprintf("objects[%d].kind", i),
				Message: fmt.Sprintf("a member of the hub does not know the kind %s yet (apply rules %d): upgrade every member first", k.Name, RulesReleaseFeeds)})
			continue
		}
		key := refKey(k.Name, name)
		if j, dup := first[key]; dup {
			bad = append(bad, apierror.Violation{Field: fmt.Sprintf("objects[%d].metadata.name", i),
				Message: fmt.Sprintf("%s %q appears twice (also objects[%d])", k.Name, name, j)})
			continue
		}
		first[key] = i
		items[i] = item{kind: k, in: r, name: name}
	}
	if len(bad) > 0 {
		return nil, apierror.Invalid("invalid objects", bad...)
	}

	results := make([]*roostv1.ApplyResult, len(items))
	final := make([]*roostv1.Object, len(items))
	var conflicts []conflict
	for i, it := range items {
		raw, err := a.txn.First(it.kind.Name, indexID, it.name)
		if err != nil {
			return nil, internal(err)
		}
		var old *roostv1.Object
		var oldRes resource.Resource
		if raw != nil {
			old = raw.(*roostv1.Object)
			oldRes, _ = resource.Unwrap(old)
		}
		if it.kind.Appliable {
			if c, ok := checkPreconditions(i, it.kind, it.name, it.in.GetMetadata(), oldRes); !ok {
				conflicts = append(conflicts, c)
				continue
			}
		}
		if len(conflicts) > 0 {
			continue // the command fails; only the remaining conflicts matter
		}
		var uid string
		var created *timestamppb.Timestamp
		if old == nil && it.kind.Appliable && it.in.GetMetadata().GetUid() != "" {
			a.warnings = append(a.warnings, fmt.Sprintf("%s/%s: created with a new uid; the manifest's metadata.uid %s is ignored "+
				"(remove it: applying this file again would be refused as a copy of a deleted object)", it.kind.Singular, it.name, it.in.GetMetadata().GetUid()))
		}
		if old == nil {
			if i < len(c.GetUids()) {
				uid = c.GetUids()[i]
			}
			if uid == "" && !c.GetDryRun() {
				bad = append(bad, apierror.Violation{Field: fmt.Sprintf("uids[%d]", i), Message: "a new object needs a UID in the command"})
				continue
			}
			now, aerr := a.now()
			if aerr != nil {
				return nil, aerr
			}
			created = now
		}
		in := it.in
		if cl, ok := in.(*roostv1.Cluster); ok {
			oldCl, _ := oldRes.(*roostv1.Cluster)
			in = clusterCredentials(cl, oldCl)
		}
		if ir, ok := in.(*roostv1.ImageRelease); ok {
			oldIR, _ := oldRes.(*roostv1.ImageRelease)
			var aerr *apierror.Error
			if in, aerr = a.putImageReleaseOver(ir, oldIR); aerr != nil {
				return nil, aerr
			}
		}
		if pl, ok := in.(*roostv1.Pool); ok {
			oldPl, _ := oldRes.(*roostv1.Pool)
			var warnings []string
			in, warnings = applyPoolOver(pl, oldPl)
			a.warnings = append(a.warnings, warnings...)
		}
		next, action := merge(it.kind, in, oldRes, a.index, created, uid)
		if ir, ok := next.(*roostv1.ImageRelease); ok && action != ActionUnchanged {
			a.syncChannelMemberships(ir, "")
		}
		if cl, ok := next.(*roostv1.Cluster); ok && action != ActionUnchanged {
			markCredentials(cl)
		}
		results[i] = &roostv1.ApplyResult{Kind: it.kind.Name, Name: it.name, Action: action}
		if action == ActionUnchanged {
			final[i] = old
			continue
		}
		obj := it.kind.Wrap(next)
		final[i] = obj
		if err := a.txn.Insert(it.kind.Name, obj); err != nil {
			return nil, internal(err)
		}
		typ := roostv1.WatchEvent_TYPE_MODIFIED
		if action == ActionCreated {
			typ = roostv1.WatchEvent_TYPE_ADDED
		}
		a.events = append(a.events, newEvent(typ, it.kind.Name, obj, a.index))
	}
	if len(conflicts) > 0 {
		return nil, conflictError(conflicts)
	}
	if len(bad) > 0 {
		return nil, apierror.Invalid("invalid command", bad...)
	}

	// References are checked after every object of the command is in the
	// transaction, so an object may refer to one later in the same command.
	for i, o := range final {
		for _, ref := range referencesOf(o) {
			ok, err := exists(a.txn, ref.Kind, ref.Name)
			if err != nil {
				return nil, internal(err)
			}
			if !ok {
				bad = append(bad, apierror.Violation{
					Field:   fmt.Sprintf("objects[%d].%s", i, ref.Field),
					Message: fmt.Sprintf("%s %q does not exist", ref.Kind, ref.Name),
					Hint:    missingRefHint,
				})
			}
		}
	}
	if len(bad) > 0 {
		msg := "references to objects that do not exist"
		if len(bad) == 1 {
			msg = bad[0].Message
		}
		return nil, apierror.FailedPreconditionFields(msg, bad...)
	}
	if aerr := a.checkExtensionUse(final, results, extBefore); aerr != nil {
		return nil, aerr
	}
	for _, o := range final {
		warnings, aerr := a.referenceWarnings(o)
		if aerr != nil {
			return nil, aerr
		}
		a.warnings = append(a.warnings, warnings...)
	}
	return results, nil
}

// conflict is a failed precondition of one object of an apply.
type conflict struct {
	ref       string // "pool/workers"
	violation apierror.Violation
}

// Hints of the conflicts: what to do about a failed precondition.
const (
	modifyIndexHint = "get it again and re-apply your change, or remove metadata.modifyIndex to overwrite"
	uidHint         = "get it again and re-apply your change, or remove metadata.uid and metadata.modifyIndex to overwrite"
	deletedHint     = "remove metadata.modifyIndex to create it again"
)

// checkPreconditions checks the preconditions in md, the metadata of
// object i of an apply (kind k, name), against old, the stored object (nil
// if there is none). Like Kubernetes' resourceVersion and uid
// preconditions:
//
//   - metadata.modifyIndex, when not 0, must equal the stored object's
//     modify index: the object has not changed since it was read, unless
//     only the hub wrote it since (see onlyHubWrites: the spec generation
//     and the labels and annotations are the ones read). When no object
//     is stored it fails too: the object was deleted since it was read
//     (or the manifest is from another hub).
//   - metadata.uid, when set, must equal the stored object's uid: the
//     object was not deleted and created again since it was read. For a
//     create it is ignored (the new object gets a fresh uid), as in
//     Kubernetes.
//
// It is deterministic and runs inside the apply's transaction, so nothing
// can change the object between the check and the write.
func checkPreconditions(i int, k *resource.Kind, name string, md *roostv1.ObjectMeta, old resource.Resource) (conflict, bool) {
	ref := k.Singular + "/" + name
	field := fmt.Sprintf("objects[%d].metadata.", i)
	want := md.GetModifyIndex()
	if old == nil {
		if want != 0 {
			return conflict{ref, apierror.Violation{Field: field + "modifyIndex", Hint: deletedHint,
				Message: fmt.Sprintf("deleted since it was read (modifyIndex %d): %s %q does not exist", want, k.Name, name)}}, false
		}
		return conflict{}, true
	}
	om := old.GetMetadata()
	if uid := md.GetUid(); uid != "" && uid != om.GetUid() {
		return conflict{ref, apierror.Violation{Field: field + "uid", Hint: uidHint,
			Message: fmt.Sprintf("deleted and created again since it was read (uid %s, now %s)", uid, om.GetUid())}}, false
	}
	if want != 0 && want != om.GetModifyIndex() && !onlyHubWrites(md, om) {
		return conflict{ref, apierror.Violation{Field: field + "modifyIndex", Hint: modifyIndexHint,
			Message: fmt.Sprintf("modified since it was read (modifyIndex %d, now %d)", want, om.GetModifyIndex())}}, false
	}
	return conflict{}, true
}

// onlyHubWrites says whether the writes to the stored object (metadata
// om) since the manifest (metadata md) was read can only have been the
// hub's own (status, such as a Pool's rollout progress): the manifest
// carries the spec generation it was read at and it is still the stored
// one (every spec change bumps it), and its labels and annotations are
// the stored ones. The apply then overwrites nobody's change, so a
// modifyIndex that moved on does not refuse it; without a generation the
// modifyIndex alone decides.
func onlyHubWrites(md, om *roostv1.ObjectMeta) bool {
	g := md.GetGeneration()
	return g != 0 && g == om.GetGeneration() &&
		maps.Equal(md.GetLabels(), om.GetLabels()) && maps.Equal(md.GetAnnotations(), om.GetAnnotations())
}

// conflictError is the Aborted error of an apply whose preconditions
// failed: one violation per conflict, and a message that names the object
// and says what to do when there is one.
func conflictError(cs []conflict) *apierror.Error {
	vs := make([]apierror.Violation, len(cs))
	for i, c := range cs {
		vs[i] = c.violation
	}
	if len(cs) == 1 {
		v := cs[0].violation
		return apierror.Aborted(fmt.Sprintf("%s: %s: %s", cs[0].ref, v.Message, v.Hint), vs...)
	}
	refs := make([]string, len(cs))
	for i, c := range cs {
		refs[i] = c.ref
	}
	return apierror.Aborted(fmt.Sprintf("%d objects changed since they were read (%s): get them again and re-apply your changes, "+
		"or remove their metadata.modifyIndex and metadata.uid to overwrite", len(cs), strings.Join(refs, ", ")), vs...)
}

// merge computes the object to store when in is applied over old (nil for
// a create) at Raft index idx. The user owns spec, labels and annotations;
// the hub owns the rest of the metadata, apiVersion, kind and status, so
// those are taken from old (or set fresh for a create: uid, generation 1,
// both indexes idx, creationTimestamp created) and ignored in in. When
// nothing the user owns changed it returns old and ActionUnchanged. in is
// consumed: its spec becomes part of the result.
func merge(k *resource.Kind, in, old resource.Resource, idx uint64, created *timestamppb.Timestamp, uid string) (resource.Resource, string) {
	next := k.New()
	nm, im := next.ProtoReflect(), in.ProtoReflect()
	fields := nm.Descriptor().Fields()
	nm.Set(fields.ByName("api_version"), protoreflect.ValueOfString(resource.APIVersion))
	nm.Set(fields.ByName("kind"), protoreflect.ValueOfString(k.Name))
	specFD, statusFD := fields.ByName("spec"), fields.ByName("status")
	if im.Has(specFD) {
		nm.Set(specFD, im.Get(specFD))
	} else {
		nm.Mutable(specFD) // always store a spec, so proto.Equal compares like with like
	}

	inMeta := in.GetMetadata()
	meta := &roostv1.ObjectMeta{
		Name:        inMeta.GetName(),
		Labels:      inMeta.GetLabels(),
		Annotations: inMeta.GetAnnotations(),
	}
	metaFD := fields.ByName("metadata")
	if old == nil {
		meta.Uid = uid
		meta.Generation = 1
		meta.CreateIndex = idx
		meta.ModifyIndex = idx
		meta.CreationTimestamp = created
		nm.Set(metaFD, protoreflect.ValueOfMessage(meta.ProtoReflect()))
		return next, ActionCreated
	}

	om := old.ProtoReflect()
	oldMeta := old.GetMetadata()
	specChanged := !proto.Equal(fieldOrEmpty(nm, specFD), fieldOrEmpty(om, specFD))
	metaChanged := !maps.Equal(oldMeta.GetLabels(), meta.Labels) || !maps.Equal(oldMeta.GetAnnotations(), meta.Annotations)
	if !specChanged && !metaChanged {
		return old, ActionUnchanged
	}
	meta.Uid = oldMeta.GetUid()
	meta.Generation = oldMeta.GetGeneration()
	if specChanged {
		meta.Generation++
	}
	meta.CreateIndex = oldMeta.GetCreateIndex()
	meta.ModifyIndex = idx
	meta.CreationTimestamp = oldMeta.GetCreationTimestamp() // shared: stored messages are immutable
	nm.Set(metaFD, protoreflect.ValueOfMessage(meta.ProtoReflect()))
	if om.Has(statusFD) {
		nm.Set(statusFD, om.Get(statusFD))
	}
	return next, ActionConfigured
}

// fieldOrEmpty returns the message in field fd of m, or an empty message
// of the field's type when it is unset.
func fieldOrEmpty(m protoreflect.Message, fd protoreflect.FieldDescriptor) proto.Message {
	if m.Has(fd) {
		return m.Get(fd).Message().Interface()
	}
	return m.NewField(fd).Message().Interface()
}

// deleteObject deletes one object. It fails with NotFound when the object
// does not exist and FailedPrecondition while other objects refer to it
// (naming them and how to free it, see freeHint). Under rulesPoolReferences
// a Pool's users also include the Servers and EnrollmentTokens that
// pre-assign servers to it (poolPreAssigners).
func (a *applier) deleteObject(c *roostv1.DeleteObject) ([]*roostv1.ApplyResult, *apierror.Error) {
	k, aerr := lookupKind(c.GetKind())
	if aerr != nil {
		return nil, aerr
	}
	name := c.GetName()
	if name == "" {
		return nil, apierror.Invalid("no name given", apierror.Violation{Field: "name", Message: "is required"})
	}
	raw, err := a.txn.First(k.Name, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, apierror.NotFound(k.Name, name)
	}
	if k.Name == kindEvent {
		// The log drops its oldest Events itself (events.go).
		return nil, apierror.FailedPrecondition("Events are not deleted; the hub drops the oldest ones itself (at most %d, none older than %s)", MaxEvents, EventTTL)
	}
	if k.Name == kindMachine {
		// Deleting a Machine releases its claim.
		return a.deleteMachines(&roostv1.DeleteMachines{Names: []string{name}})
	}
	users, err := usersOf(a.txn, k.Name, name)
	if err != nil {
		return nil, internal(err)
	}
	if k.Name == kindPool && a.rules >= rulesPoolReferences {
		servers, tokens, aerr := a.poolPreAssigners(name)
		if aerr != nil {
			return nil, aerr
		}
		// In kind registry order, as usersOf lists them: Servers, then
		// the Machines, then EnrollmentTokens.
		users = append(append(servers, users...), tokens...)
	}
	if len(users) > 0 {
		return nil, apierror.FailedPrecondition("%s %q is used by %s: %s", k.Name, name, joinUsers(users), freeHint(k.Name, name, users))
	}
	if err := a.txn.Delete(k.Name, raw); err != nil {
		return nil, internal(err)
	}
	ev := newEvent(roostv1.WatchEvent_TYPE_DELETED, k.Name, raw.(*roostv1.Object), a.index)
	if r, _ := resource.Unwrap(ev.ev.GetObject()); r != nil && r.GetMetadata() != nil {
		r.GetMetadata().ModifyIndex = a.index // the clone, not the stored object
	}
	a.events = append(a.events, ev)
	return []*roostv1.ApplyResult{{Kind: k.Name, Name: name, Action: ActionDeleted}}, nil
}

// lookupKind resolves a kind name or alias; unknown kinds are Invalid with
// field "kind".
func lookupKind(name string) (*resource.Kind, *apierror.Error) {
	k, err := resource.Lookup(name)
	if err != nil {
		return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "kind", Message: err.Error()})
	}
	return k, nil
}
