package api

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
)

// authority loads the replicated CA.
func (s *Server) authority() (*ca.Authority, error) {
	c := s.fsm.CA()
	if c == nil {
		return nil, apierror.NotApplied("the hub CA is not initialised yet; retry")
	}
	return ca.Load(c)
}

// checkCSR parses a PEM PKCS#10 request and checks its signature.
func checkCSR(csrPEM []byte) error {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return fmt.Errorf("not a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return fmt.Errorf("parse certificate request: %w", err)
	}
	return csr.CheckSignature()
}
