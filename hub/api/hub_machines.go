package api

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/scheduler"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// checkHostname checks a Machine host name: dot-separated RFC 1123 labels
// (lower-case letters, digits and '-', 1-63 characters each), at most 64
// characters in all (Linux's HOST_NAME_MAX).
func checkHostname(field, h string) []apierror.Violation {
	if len(h) > 64 {
		return []apierror.Violation{{Field: field, Message: fmt.Sprintf("%q is %d characters; a Linux host name has at most 64", h, len(h))}}
	}
	for _, label := range strings.Split(h, ".") {
		if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
			return []apierror.Violation{{Field: field, Message: fmt.Sprintf("%q: label %q: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters (RFC 1123)", h, label)}}
		}
	}
	return nil
}

func checkNames(field string, names []string) []apierror.Violation {
	var vs []apierror.Violation
	if len(names) == 0 {
		vs = append(vs, apierror.Violation{Field: field, Message: "name at least one Server"})
	}
	seen := map[string]bool{}
	for i, n := range names {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case n == "":
			vs = append(vs, apierror.Violation{Field: f, Message: "is empty"})
		case seen[n]:
			vs = append(vs, apierror.Violation{Field: f, Message: fmt.Sprintf("%s is named twice", n)})
		}
		seen[n] = true
	}
	return vs
}

// AssignServers claims Servers for a Pool with explicit membership.
// Errors: InvalidArgument (no pool or servers, a bad host name, a host name
// for several servers), NotFound (no such Pool or Server), AlreadyExists
// (the host name is used by another Machine of the pool), FailedPrecondition
// (a Pool with replicas, a Server that cannot be claimed).
func (s *Server) AssignServers(ctx context.Context, req *roostv1.AssignServersRequest) (*roostv1.AssignServersResponse, error) {
	var vs []apierror.Violation
	if req.GetPool() == "" {
		vs = append(vs, apierror.Violation{Field: "pool", Message: "is required"})
	}
	vs = append(vs, checkNames("servers", req.GetServers())...)
	if h := req.GetHostname(); h != "" {
		if len(req.GetServers()) > 1 {
			vs = append(vs, apierror.Violation{Field: "hostname", Message: "may only be set when assigning one Server"})
		}
		vs = append(vs, checkHostname("hostname", h)...)
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid assignment", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.AssignServersResponse, error) {
		c := &roostv1.CreateMachines{}
		for _, srv := range req.GetServers() {
			c.Machines = append(c.Machines, &roostv1.NewMachine{Name: scheduler.MachineName(req.GetPool()), Uid: uuid.NewString(), Server: srv, Pool: req.GetPool(), Hostname: req.GetHostname()})
		}
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: c}})
		if err != nil {
			return nil, err
		}
		out := &roostv1.AssignServersResponse{Index: res.Index}
		for _, r := range res.Results {
			o, err := s.fsm.Get("Machine", r.GetName())
			if err != nil {
				return nil, err
			}
			out.Machines = append(out.Machines, o.GetMachine())
		}
		return out, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.AssignServersResponse, error) {
		return roostv1.NewHubServiceClient(c).AssignServers(fctx, req)
	})
}

// UnassignServers releases the Pool's Machines on the given Servers. Unless
// req.force, the Nodes of worker Machines are cordoned and drained first
// (drainForRelease: the call waits, and releases nothing when a drain
// fails).
func (s *Server) UnassignServers(ctx context.Context, req *roostv1.UnassignServersRequest) (*roostv1.UnassignServersResponse, error) {
	var vs []apierror.Violation
	if req.GetPool() == "" {
		vs = append(vs, apierror.Violation{Field: "pool", Message: "is required"})
	}
	vs = append(vs, checkNames("servers", req.GetServers())...)
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid unassignment", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.UnassignServersResponse, error) {
		if rec, ok := s.priorRequest(ctx, req); ok { // a retry of a release that was applied
			out := &roostv1.UnassignServersResponse{Index: rec.GetIndex()}
			for _, r := range rec.GetResults() {
				out.Machines = append(out.Machines, r.GetName())
			}
			return out, nil
		}
		if !req.GetForce() {
			ms, err := s.machinesOfServers(req.GetPool(), req.GetServers())
			if err != nil {
				return nil, err
			}
			if err := s.drainForRelease(ctx, ms); err != nil {
				return nil, err
			}
		}
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{
			Pool: req.GetPool(), Servers: req.GetServers()}}})
		if err != nil {
			return nil, err
		}
		out := &roostv1.UnassignServersResponse{Index: res.Index}
		for _, r := range res.Results {
			out.Machines = append(out.Machines, r.GetName())
		}
		return out, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.UnassignServersResponse, error) {
		return roostv1.NewHubServiceClient(c).UnassignServers(fctx, req)
	})
}

// CreateMachine claims one Server for a standalone Machine.
func (s *Server) CreateMachine(ctx context.Context, req *roostv1.CreateMachineRequest) (*roostv1.CreateMachineResponse, error) {
	var vs []apierror.Violation
	if req.GetServer() == "" {
		vs = append(vs, apierror.Violation{Field: "server", Message: "is required"})
	}
	name := req.GetName()
	if name == "" {
		name = req.GetServer()
	}
	if name != "" {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			vs = append(vs, apierror.Violation{Field: "name", Message: fmt.Sprintf("%q: %s", name, msgs[0])})
		}
	}
	if h := req.GetHostname(); h != "" {
		vs = append(vs, checkHostname("hostname", h)...)
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid machine", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.CreateMachineResponse, error) {
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{
			Machines: []*roostv1.NewMachine{{Name: name, Uid: uuid.NewString(), Server: req.GetServer(), Hostname: req.GetHostname(),
				MachineClass: req.GetMachineClass(), NetworkProfile: req.GetNetworkProfile()}}}}})
		if err != nil {
			return nil, err
		}
		o, err := s.fsm.Get("Machine", name)
		if err != nil {
			return nil, err
		}
		return &roostv1.CreateMachineResponse{Machine: o.GetMachine(), Index: res.Index}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.CreateMachineResponse, error) {
		return roostv1.NewHubServiceClient(c).CreateMachine(fctx, req)
	})
}
