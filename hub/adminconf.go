package hub

import (
	"time"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub/ca"
)

// writeAdminConfig writes DIR/admin.conf with an admin client certificate
// (valid one year) unless it exists.
func (h *Hub) writeAdminConfig() error {
	if exists(h.dir.adminConfig()) {
		return nil
	}
	authority, err := ca.Load(h.fsm.CA())
	if err != nil {
		return err
	}
	cert, key, err := authority.Issue(ca.Profile{CommonName: "admin", Role: ca.RoleAdmin, Lifetime: 365 * 24 * time.Hour}, time.Now())
	if err != nil {
		return err
	}
	cfg := &client.Config{
		Hubs:                 []string{h.APIAddr()},
		CertificateAuthority: string(authority.CertificatePEM()),
		ClientCertificate:    string(cert),
		ClientKey:            string(key),
	}
	if err := cfg.Write(h.dir.adminConfig()); err != nil {
		return err
	}
	h.log.Info("wrote admin client configuration", "path", h.dir.adminConfig())
	return nil
}
