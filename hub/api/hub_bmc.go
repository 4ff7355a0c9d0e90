package api

import (
	"context"
	"fmt"
	"net"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// RegisterServer records a Server with its BMC before it enrolls, or sets
// the BMC of an existing Server. The response never holds the BMC's
// credentials.
func (s *Server) RegisterServer(ctx context.Context, req *roostv1.RegisterServerRequest) (*roostv1.RegisterServerResponse, error) {
	var vs []apierror.Violation
	if msgs := resource.NameErrors(req.GetName()); len(msgs) > 0 {
		vs = append(vs, apierror.Violation{Field: "name", Message: msgs[0], Hint: "a DNS label, e.g. r12u7"})
	}
	vs = append(vs, resource.ValidateBMC("bmc", req.GetBmc(), true)...)
	macs := make([]string, 0, len(req.GetMacs()))
	for i, m := range req.GetMacs() {
		hw, err := net.ParseMAC(m)
		if err != nil || len(hw) != 6 {
			vs = append(vs, apierror.Violation{Field: fmt.Sprintf("macs[%d]", i), Message: fmt.Sprintf("%q is not a MAC address", m), Hint: "e.g. 52:54:00:12:34:56"})
			continue
		}
		macs = append(macs, hw.String())
	}
	if p := req.GetPool(); p != "" {
		if msgs := resource.NameErrors(p); len(msgs) > 0 {
			vs = append(vs, apierror.Violation{Field: "pool", Message: msgs[0]})
		}
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid server registration", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.RegisterServerResponse, error) {
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_RegisterServer{RegisterServer: &roostv1.RegisterServer{
			Name: req.GetName(), Uid: uuid.NewString(), Bmc: req.GetBmc(), Macs: macs, Pool: req.GetPool(),
		}}})
		if err != nil {
			return nil, err
		}
		if len(res.Results) == 1 {
			setResult(ctx, res.Results[0].GetAction())
		}
		o, err := s.fsm.Get("Server", req.GetName())
		if err != nil {
			return nil, err
		}
		return &roostv1.RegisterServerResponse{Server: stripServer(o.GetServer()), Warnings: state.BMCWarnings(req.GetBmc())}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.RegisterServerResponse, error) {
		return roostv1.NewHubServiceClient(c).RegisterServer(fctx, req)
	})
}

// checkBMCAction checks the fields of UpdateServer's BMC actions.
func checkBMCAction(req *roostv1.UpdateServerRequest) []apierror.Violation {
	switch req.GetAction() {
	case roostv1.ServerAction_SERVER_ACTION_POWER:
		switch req.GetPower() {
		case "on", "off", "cycle":
		default:
			return []apierror.Violation{{Field: "power", Message: fmt.Sprintf("%q: want on, off or cycle", req.GetPower())}}
		}
	case roostv1.ServerAction_SERVER_ACTION_BOOT_ONCE:
		switch req.GetBootDevice() {
		case "cd", "pxe", "disk":
		default:
			return []apierror.Violation{{Field: "bootDevice", Message: fmt.Sprintf("%q: want cd, pxe or disk", req.GetBootDevice())}}
		}
	case roostv1.ServerAction_SERVER_ACTION_PROVISION:
		if !resource.ValidDigest(req.GetMediaDigest()) {
			return []apierror.Violation{{Field: "mediaDigest", Message: "want the 64 lower-case hex digits of a sha256 digest", Hint: "push the enrollment ISO first (roostctl server provision --iso FILE does)"}}
		}
	}
	return nil
}

// stripServer is srv without its write-only fields (the BMC account).
func stripServer(srv *roostv1.Server) *roostv1.Server {
	if srv.GetSpec().GetBmc() == nil {
		return srv
	}
	cp := proto.Clone(srv).(*roostv1.Server)
	cp.Spec.Bmc.Username, cp.Spec.Bmc.Password = "", ""
	return cp
}
