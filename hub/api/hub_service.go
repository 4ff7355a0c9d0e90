package api

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Apply validates every object (static checks at the edge) and applies them
// all or nothing through one Raft command on the leader. The FSM's
// warnings (state.ApplyResult.Warnings: a Pool's pause kept, a pin a
// manifest dropped) are sent as WarningHeader values, also for dry runs.
// An object's metadata.modifyIndex and metadata.uid reach the FSM as they
// are: when set they are preconditions, and a mismatch fails the whole
// apply with Aborted (state.applyObjects); status and the other hub-set
// metadata are ignored.
func (s *Server) Apply(ctx context.Context, req *roostv1.ApplyRequest) (*roostv1.ApplyResponse, error) {
	if len(req.GetObjects()) == 0 {
		return nil, apierror.Invalid("nothing to apply", apierror.Violation{Field: "objects", Message: "must hold at least one object"})
	}
	if resp, done, err := s.applyExtensions(ctx, req); done { // Extensions are pushed (extension.go)
		return resp, err
	}
	var vs []apierror.Violation
	for i, o := range req.GetObjects() {
		prefix := fmt.Sprintf("objects[%d]", i)
		r, k := resource.Unwrap(o)
		if r == nil {
			vs = append(vs, apierror.Violation{Field: prefix, Message: "empty object"})
			continue
		}
		if !k.Appliable {
			vs = append(vs, apierror.Violation{Field: prefix + ".kind", Message: fmt.Sprintf("%s objects are managed by the hub and cannot be applied", k.Name)})
			continue
		}
		if v := resource.CheckSize(o, resource.SizeHint); v != nil {
			v.Field = prefix
			vs = append(vs, *v)
			continue
		}
		for _, v := range resource.Validate(o) {
			v.Field = prefix + "." + v.Field
			vs = append(vs, v)
		}
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid objects", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.ApplyResponse, error) {
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
			Objects: req.GetObjects(), Uids: newUIDs(len(req.GetObjects())), DryRun: req.GetDryRun(),
		}}})
		if err != nil {
			return nil, err
		}
		for _, w := range res.Warnings {
			setWarning(ctx, w)
		}
		return &roostv1.ApplyResponse{Results: res.Results, Index: res.Index}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.ApplyResponse, error) {
		var hdr metadata.MD
		resp, err := roostv1.NewHubServiceClient(c).Apply(fctx, req, grpc.Header(&hdr))
		for _, w := range hdr.Get(WarningHeader) {
			setWarning(ctx, w) // pass the leader's warnings on
		}
		return resp, err
	})
}

// Delete removes one object; it fails with NotFound, or FailedPrecondition
// while other objects reference it. A worker Machine's Node is cordoned
// and drained first unless req.force (see drainForRelease).
func (s *Server) Delete(ctx context.Context, req *roostv1.DeleteRequest) (*roostv1.DeleteResponse, error) {
	k, err := lookupKind(req.GetKind())
	if err != nil {
		return nil, err
	}
	if k.Name == "Revision" {
		return nil, apierror.FailedPrecondition("Revisions are written by the hub and kept as the Server's boot history; " +
			"change the Machine, Pool, MachineClass or labels to make a new one, or delete the Machine")
	}
	return onLeader(ctx, s, func() (*roostv1.DeleteResponse, error) {
		if rec, ok := s.priorRequest(ctx, req); ok {
			return &roostv1.DeleteResponse{Index: rec.GetIndex()}, nil // a retry of a delete that was applied
		}
		if k.Name == "Server" {
			if err := s.checkServerDelete(req.GetName(), req.GetForce()); err != nil {
				return nil, err
			}
		}
		if k.Name == "Machine" && !req.GetForce() {
			if o, err := s.fsm.Get("Machine", req.GetName()); err == nil {
				if err := s.drainForRelease(ctx, []*roostv1.Machine{o.GetMachine()}); err != nil {
					return nil, err
				}
			}
		}
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_DeleteObject{DeleteObject: &roostv1.DeleteObject{Kind: k.Name, Name: req.GetName()}}})
		if err != nil {
			return nil, err
		}
		return &roostv1.DeleteResponse{Index: res.Index}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.DeleteResponse, error) {
		return roostv1.NewHubServiceClient(c).Delete(fctx, req)
	})
}

// Get reads one object at the requested consistency.
func (s *Server) Get(ctx context.Context, req *roostv1.GetRequest) (*roostv1.GetResponse, error) {
	k, err := lookupKind(req.GetKind())
	if err != nil {
		return nil, err
	}
	local := func() (*roostv1.GetResponse, error) {
		o, err := s.fsm.Get(k.Name, req.GetName())
		if err != nil {
			return nil, err
		}
		return &roostv1.GetResponse{Object: resource.StripWriteOnly(o)}, nil
	}
	if req.GetConsistency() == roostv1.Consistency_CONSISTENCY_STALE {
		return local()
	}
	return onLeader(ctx, s, func() (*roostv1.GetResponse, error) {
		if _, err := s.node.ReadBarrier(ctx); err != nil {
			return nil, err
		}
		return local()
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.GetResponse, error) {
		return roostv1.NewHubServiceClient(c).Get(fctx, req)
	})
}

// List reads all objects of a kind matching a label selector, sorted by name.
func (s *Server) List(ctx context.Context, req *roostv1.ListRequest) (*roostv1.ListResponse, error) {
	k, err := lookupKind(req.GetKind())
	if err != nil {
		return nil, err
	}
	if io := req.GetInvolvedObject(); io != nil && k.Name != "Event" {
		return nil, apierror.Invalid("involvedObject filters Events only", apierror.Violation{Field: "involvedObject",
			Message: fmt.Sprintf("is set, but kind is %s; list kind Event", k.Name)})
	}
	local := func() (*roostv1.ListResponse, error) {
		var objs []*roostv1.Object
		var idx uint64
		var err error
		if io := req.GetInvolvedObject(); io != nil {
			objs, idx, err = s.fsm.EventsFor(io.GetKind(), io.GetName(), req.GetLabelSelector())
		} else {
			objs, idx, err = s.fsm.List(k.Name, req.GetLabelSelector())
		}
		if err != nil {
			return nil, err
		}
		for i, o := range objs {
			objs[i] = resource.StripWriteOnly(o)
		}
		return &roostv1.ListResponse{Objects: objs, Index: idx}, nil
	}
	if req.GetConsistency() == roostv1.Consistency_CONSISTENCY_STALE {
		return local()
	}
	return onLeader(ctx, s, func() (*roostv1.ListResponse, error) {
		if _, err := s.node.ReadBarrier(ctx); err != nil {
			return nil, err
		}
		return local()
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.ListResponse, error) {
		return roostv1.NewHubServiceClient(c).List(fctx, req)
	})
}

// Watch streams this member's view of changes (eventually consistent: a
// follower's stream may lag the leader).
func (s *Server) Watch(req *roostv1.WatchRequest, stream grpc.ServerStreamingServer[roostv1.WatchEvent]) error {
	kind := ""
	if req.GetKind() != "" {
		k, err := lookupKind(req.GetKind())
		if err != nil {
			return err
		}
		kind = k.Name
	}
	sub, err := s.fsm.Subscribe(kind, req.GetFromIndex())
	if err != nil {
		return err
	}
	defer sub.Close()
	for {
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case ev, ok := <-sub.Events():
			if !ok {
				return sub.Err()
			}
			if r := resource.StripWriteOnly(ev.GetObject()); r != ev.GetObject() {
				ev = proto.Clone(ev).(*roostv1.WatchEvent)
				ev.Object = r
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

func lookupKind(name string) (*resource.Kind, error) {
	k, err := resource.Lookup(name)
	if err != nil {
		return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "kind", Message: err.Error()})
	}
	return k, nil
}
