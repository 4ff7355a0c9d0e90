package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/agent/config"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// reregister asks the hub member the agent tried last to record this
// Server again (AgentService.Reregister) with the identity and inventory
// it reports now; the hub holds it for an operator's approval. A Server
// the hub has again meanwhile (AlreadyExists) is no error.
func (a *Agent) reregister(ctx context.Context) error {
	addr := a.tried
	id, err := a.o.Identity.Identity(ctx)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	inv := a.gatherInventory(ctx)
	conn, err := a.dial(addr, false)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	_, err = roostv1.NewAgentServiceClient(conn).Reregister(cctx, &roostv1.ReregisterRequest{Identity: id, Inventory: inv, AgentVersion: a.o.Version})
	switch status.Code(err) {
	case codes.OK:
		a.log.Warn("the hub had no record of this Server; re-registered it with its certificate: it waits for an operator's approval",
			"hub", addr, "server", a.state.ServerName, "fix", "roostctl server approve "+a.state.ServerName)
		return nil
	case codes.AlreadyExists:
		return nil
	}
	return fmt.Errorf("re-register: %w", err)
}

func (a *Agent) enroll(ctx context.Context) error {
	addr := a.currentHub()
	a.tried = addr
	id, err := a.o.Identity.Identity(ctx)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	inv := a.gatherInventory(ctx)
	csr, err := NewCSR(a.key, "roost-agent")
	if err != nil {
		return err
	}
	conn, err := a.dial(addr, true)
	if err != nil {
		return err
	}
	if a.o.EnrollGate != nil {
		release, err := a.o.EnrollGate(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	resp, err := roostv1.NewAgentServiceClient(conn).Enroll(cctx, &roostv1.EnrollRequest{
		Token: a.o.Token, CsrPem: csr, Identity: id, Inventory: inv, AgentVersion: a.o.Version,
	})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.PermissionDenied, codes.InvalidArgument, codes.Unauthenticated, codes.FailedPrecondition, codes.Unimplemented:
				a.log.Error("enrollment refused", "hub", addr, "code", st.Code().String(), "reason", st.Message())
				return &RefusedError{Code: st.Code(), Reason: st.Message()}
			}
		}
		return fmt.Errorf("enroll: %w", err)
	}
	kp, err := keyPair(resp.GetCertificatePem(), a.keyPEM)
	if err != nil {
		return fmt.Errorf("enroll: the hub's certificate does not fit the agent key: %w", err)
	}
	if resp.GetServerName() == "" {
		return errors.New("enroll: the hub returned no server name")
	}
	ca := resp.GetCaBundlePem()
	if len(ca) > 0 {
		if _, err := config.ParseCABundle(ca); err != nil {
			return fmt.Errorf("enroll: the hub's CA bundle: %w", err)
		}
	}
	st := a.state
	st.ServerName = resp.GetServerName()
	if len(resp.GetHubs()) > 0 {
		st.Hubs = resp.GetHubs()
	}
	if err := a.o.Store.SaveState(st); err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	if err := a.o.Store.SaveCertificate(resp.GetCertificatePem(), ca); err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	a.state = st
	a.cert.Store(kp)
	if len(ca) > 0 {
		a.caPEM = ca
		if err := a.setTLS(); err != nil {
			return err
		}
	}
	a.dropConn()
	a.setHubs(st.Hubs)
	a.log.Info("enrolled", "server", st.ServerName, "hub", addr, "certificate_expires", kp.Leaf.NotAfter.UTC().Format(time.RFC3339), "hubs", len(a.hubs))
	if a.o.Observer != nil {
		a.o.Observer.Enrolled(st.ServerName)
	}
	return nil
}

// RefusedError is a permanent refusal of enrollment by the hub: a wrong,
// expired, revoked or used-up token, or a request the hub finds malformed.
// The agent stops; retrying with the same token would not help.
type RefusedError struct {
	Code   codes.Code
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("enrollment refused (%s): %s", e.Code, e.Reason)
}
