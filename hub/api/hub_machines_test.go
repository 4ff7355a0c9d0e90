package api

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Requests are checked at the edge, before anything reaches Raft (the
// Server has no node: a request that got further would panic).
func TestMachineRequestValidation(t *testing.T) {
	s := &Server{}
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"assign without pool": func() error {
			_, err := s.AssignServers(ctx, &roostv1.AssignServersRequest{Servers: []string{"a"}})
			return err
		},
		"assign without servers": func() error {
			_, err := s.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "p"})
			return err
		},
		"assign twice": func() error {
			_, err := s.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "p", Servers: []string{"a", "a"}})
			return err
		},
		"unassign empty name": func() error {
			_, err := s.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: "p", Servers: []string{""}})
			return err
		},
		"create without server": func() error {
			_, err := s.CreateMachine(ctx, &roostv1.CreateMachineRequest{Name: "edge-1"})
			return err
		},
		"create bad name": func() error {
			_, err := s.CreateMachine(ctx, &roostv1.CreateMachineRequest{Server: "a", Name: "Edge_1"})
			return err
		},
	} {
		if code := apierror.Code(call()); code != codes.InvalidArgument {
			t.Errorf("%s: code %v, want InvalidArgument", name, code)
		}
	}
}

func TestCheckHostname(t *testing.T) {
	for h, ok := range map[string]bool{
		"demo-1": true, "node-7.rack-12.example.net": true, strings.Repeat("a", 63): true,
		strings.Repeat("a", 64): false, "Bad_Name": false, "-x": false, "a..b": false,
		strings.Repeat("a.", 31) + "a": true, strings.Repeat("a.", 31) + "abc": false,
	} {
		if got := len(checkHostname("hostname", h)) == 0; got != ok {
			t.Errorf("checkHostname(%q) ok = %v, want %v", h, got, ok)
		}
	}
}
