package agent

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// renew asks the hub to sign a new certificate for the agent's key.
func (a *Agent) renew(ctx context.Context, conn *grpc.ClientConn) error {
	csr, err := NewCSR(a.key, a.state.ServerName)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	resp, err := roostv1.NewAgentServiceClient(conn).RenewCertificate(cctx, &roostv1.RenewCertificateRequest{CsrPem: csr})
	if err != nil {
		return fmt.Errorf("renew certificate: %w", err)
	}
	kp, err := keyPair(resp.GetCertificatePem(), a.keyPEM)
	if err != nil {
		return fmt.Errorf("renew certificate: the hub's certificate does not fit the agent key: %w", err)
	}
	if err := a.o.Store.SaveCertificate(resp.GetCertificatePem(), resp.GetCaBundlePem()); err != nil {
		return err
	}
	a.cert.Store(kp)
	if len(resp.GetHubs()) > 0 {
		st := a.state
		st.Hubs = resp.GetHubs()
		if err := a.o.Store.SaveState(st); err != nil {
			return err
		}
		a.state = st
		a.setHubs(st.Hubs)
	}
	if ca := resp.GetCaBundlePem(); len(ca) > 0 && string(ca) != string(a.caPEM) {
		a.caPEM = ca
		if err := a.setTLS(); err != nil {
			return err
		}
	}
	a.log.Info("certificate renewed", "expires", kp.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}
