package hub

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/version"
)

// fetchMemberCertificate runs MemberService.Join against opts.Join: it
// trusts the hub only if its CA matches the fingerprint in the token.
func (h *Hub) fetchMemberCertificate(ctx context.Context) error {
	tok, err := api.ParseJoinToken(h.opts.JoinToken)
	if err != nil {
		return err
	}
	csr, key, err := ca.NewCSR(h.id)
	if err != nil {
		return err
	}
	pinned := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // verified below against the pinned CA fingerprint
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyPinnedChain(raw, tok.CAFingerprint)
		},
	}
	conn, err := grpc.NewClient(h.opts.Join, grpc.WithTransportCredentials(credentials.NewTLS(pinned)))
	if err != nil {
		return err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The Raft address is the one AddVoter will add (the transport is
	// bound already): the hub refuses it now if another member has it,
	// before the token is used.
	resp, err := roostv1.NewMemberServiceClient(conn).Join(cctx, &roostv1.JoinRequest{Token: tok.String(), NodeId: h.id, CsrPem: csr, RulesVersion: state.RulesVersion,
		RaftAddress: h.raftAddr})
	if err != nil {
		return apierror.FromError(err) // keeps the field violations, which name the fix
	}
	for path, data := range map[string][]byte{h.dir.caCert(): resp.GetCaBundlePem(), h.dir.memberCert(): append(resp.GetCertificatePem(), resp.GetCaBundlePem()...), h.dir.memberKey(): key} {
		if err := writeFile(path, data, 0o600); err != nil {
			return err
		}
	}
	h.log.Info("received member certificate", "from", h.opts.Join)
	return nil
}

// verifyPinnedChain accepts a TLS chain whose last certificate is the CA
// with the given sha256 fingerprint and whose leaf that CA signed.
func verifyPinnedChain(raw [][]byte, fingerprint string) error {
	if len(raw) == 0 {
		return errors.New("hub presented no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	// Members send their leaf followed by the CA certificate (DIR/tls/member.crt
	// holds both), so the pinned CA is found in the chain by its fingerprint.
	for _, c := range certs {
		sum := sha256.Sum256(c.Raw)
		if hex.EncodeToString(sum[:]) == fingerprint {
			if c == certs[0] || certs[0].CheckSignatureFrom(c) == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("hub certificate is not signed by the CA pinned in the join token (sha256 %s…)", fingerprint[:12])
}

// addSelfAsVoter asks the cluster to add this member, retrying until it
// succeeds or ctx ends.
func (h *Hub) addSelfAsVoter(ctx context.Context, clientTLS *tls.Config) {
	conn, err := grpc.NewClient(h.opts.Join, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	if err != nil {
		h.log.Error("join: dial", "err", err)
		return
	}
	defer conn.Close()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := roostv1.NewMemberServiceClient(conn).AddVoter(cctx, &roostv1.AddVoterRequest{NodeId: h.id, RaftAddress: h.node.Addr(), ApiAddress: h.APIAddr(),
			HubVersion: version.Version, RulesVersion: state.RulesVersion})
		cancel()
		if err == nil {
			h.wasMember.Store(true)
			h.log.Info("joined the cluster as a voter", "via", h.opts.Join)
			if err := writeFile(h.dir.joined(), []byte(h.opts.Join+"\n"), 0o600); err != nil {
				h.log.Error("join: cannot record the join", "err", err)
			}
			return
		}
		wait := backoff
		if apierror.Code(err) == codes.FailedPrecondition {
			// Refused (another member holds this ID or Raft address, or this
			// roost-hub is too old): only the operator can fix it.
			wait = 30 * time.Second
			h.log.Error("join: the hub refused to add this member; retrying", "err", err, "in", wait)
		} else {
			h.log.Warn("join: add voter failed; retrying", "err", err, "in", wait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
