package hub

import (
	"crypto/x509"
	"net"
	"time"

	"github.com/roostfleet/roost/hub/ca"
)

// createCA makes the hub CA and this member's certificate for a new
// cluster. The CA key stays in DIR/tls/ca.key until the CA is replicated.
func (h *Hub) createCA() error {
	now := time.Now()
	authorityPB, err := ca.New("Roost hub CA", now)
	if err != nil {
		return err
	}
	authority, err := ca.Load(authorityPB)
	if err != nil {
		return err
	}
	cert, key, err := authority.Issue(h.memberProfile(), now)
	if err != nil {
		return err
	}
	for path, data := range map[string][]byte{
		h.dir.caKey(): authorityPB.GetPrivateKeyPem(), h.dir.caCert(): authorityPB.GetCertificatePem(),
		h.dir.memberCert(): append(cert, authorityPB.GetCertificatePem()...), h.dir.memberKey(): key,
	} {
		if err := writeFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (h *Hub) memberProfile() ca.Profile {
	p := ca.Profile{CommonName: h.id, Role: ca.RoleMember, Lifetime: 5 * 365 * 24 * time.Hour, DNSNames: []string{"localhost"}}
	for _, addr := range []string{h.opts.APIAddr, h.opts.RaftAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			continue
		}
		if ip := net.ParseIP(host); ip != nil {
			p.IPAddresses = append(p.IPAddresses, ip)
		} else {
			p.DNSNames = append(p.DNSNames, host)
		}
	}
	return p
}

func (h *Hub) loadTLS() (cert, key []byte, pool *x509.CertPool, err error) {
	return ca.ReadFiles(h.dir.memberCert(), h.dir.memberKey(), h.dir.caCert())
}
