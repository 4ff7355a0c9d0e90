package state

import (
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// initCA stores the hub CA once; FailedPrecondition if one exists.
func (a *applier) initCA(c *roostv1.InitCA) *apierror.Error {
	ca := c.GetCa()
	var bad []apierror.Violation
	if len(ca.GetCertificatePem()) == 0 {
		bad = append(bad, apierror.Violation{Field: "ca.certificatePem", Message: "is required"})
	}
	if len(ca.GetPrivateKeyPem()) == 0 {
		bad = append(bad, apierror.Violation{Field: "ca.privateKeyPem", Message: "is required"})
	}
	if len(bad) > 0 {
		return apierror.Invalid("invalid CA", bad...)
	}
	raw, err := a.txn.First(tableCA, indexID, singletonKey)
	if err != nil {
		return internal(err)
	}
	if raw != nil {
		return apierror.FailedPrecondition("the hub CA is already initialised")
	}
	if err := a.txn.Insert(tableCA, ca); err != nil {
		return internal(err)
	}
	return nil
}

// CA returns a copy of the hub CA (certificate and private key, PEM), or
// nil before InitCA was applied.
func (f *FSM) CA() *roostv1.CertificateAuthority {
	raw, err := f.db.Load().Txn(false).First(tableCA, indexID, singletonKey)
	if err != nil || raw == nil {
		return nil
	}
	return proto.Clone(raw.(*roostv1.CertificateAuthority)).(*roostv1.CertificateAuthority)
}
