package api

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"google.golang.org/grpc"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// HubService's release keys: the keys whose signatures the leader checks
// on PutImageRelease (checkReleaseSignature), and the warnings it sends.

// maxKeyComment is the longest comment TrustReleaseKey accepts, in bytes.
const maxKeyComment = 256

// noTrustedKeyWarning is sent with PutImageRelease while no release key
// is trusted.
const noTrustedKeyWarning = "no release key is trusted, so the hub recorded the release without checking its signature " +
	"(agents still check it with their own keys): trust the signing key with 'roostctl image trust add KEY.pub'"

// TrustReleaseKey adds an ed25519 public key (PKIX PEM) whose release
// signatures the hub accepts. Trusting a key that is already trusted
// succeeds (a new non-empty comment replaces the old one; the response
// says it was trusted and its comment before). Errors:
// InvalidArgument (not a PEM ed25519 public key, comment too long).
func (s *Server) TrustReleaseKey(ctx context.Context, req *roostv1.TrustReleaseKeyRequest) (*roostv1.TrustReleaseKeyResponse, error) {
	var vs []apierror.Violation
	pub, err := releasesig.ParsePublicKeyPEM([]byte(req.GetPublicKeyPem()))
	if err != nil {
		vs = append(vs, apierror.Violation{Field: "publicKeyPem", Message: err.Error(), Hint: "give the KEY.pub that 'roost-image keygen' wrote"})
	}
	if c := req.GetComment(); len(c) > maxKeyComment {
		vs = append(vs, apierror.Violation{Field: "comment", Message: fmt.Sprintf("is %d bytes, more than %d", len(c), maxKeyComment)})
	} else if strings.IndexFunc(c, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		vs = append(vs, apierror.Violation{Field: "comment", Message: "holds control characters", Hint: "write one line of text"})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid release key", vs...)
	}
	id := releasesig.KeyID(pub)
	key := &roostv1.TrustedKey{Id: id, PublicKeyPem: string(releasesig.MarshalPublicKeyPEM(pub)), Comment: req.GetComment()}
	return onLeader(ctx, s, func() (*roostv1.TrustReleaseKeyResponse, error) {
		var before *roostv1.TrustedKey
		for _, k := range s.fsm.TrustedKeys() {
			if k.GetId() == id {
				before = k
			}
		}
		if _, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_PutTrustedKey{PutTrustedKey: &roostv1.PutTrustedKey{Key: key}}}); err != nil {
			return nil, err
		}
		for _, k := range s.fsm.TrustedKeys() {
			if k.GetId() == id {
				return &roostv1.TrustReleaseKeyResponse{Key: k, WasTrusted: before != nil, PreviousComment: before.GetComment()}, nil
			}
		}
		return nil, apierror.Unavailable("release key %s was removed meanwhile; retry", id)
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.TrustReleaseKeyResponse, error) {
		return roostv1.NewHubServiceClient(c).TrustReleaseKey(fctx, req)
	})
}

// UntrustReleaseKey removes a trusted key by id or a unique prefix of it
// (at least 4 hex digits). Releases recorded while it was trusted stay.
// Errors: InvalidArgument (not hex, or a prefix of several keys, which the
// message names), NotFound.
func (s *Server) UntrustReleaseKey(ctx context.Context, req *roostv1.UntrustReleaseKeyRequest) (*roostv1.UntrustReleaseKeyResponse, error) {
	id := strings.ToLower(strings.TrimSpace(req.GetId()))
	switch {
	case !state.IsKeyID(id):
		return nil, apierror.Invalid("invalid key id", apierror.Violation{Field: "id", Message: fmt.Sprintf("%q is not a key id or a prefix of one (hex digits)", req.GetId()),
			Hint: "give at least 4 hex digits of an ID that 'roostctl image trust list' shows"})
	case len(id) < 4:
		return nil, apierror.Invalid("key id prefix too short", apierror.Violation{Field: "id", Message: fmt.Sprintf("%q is shorter than 4 hex digits", req.GetId()),
			Hint: "give at least 4 hex digits of an ID that 'roostctl image trust list' shows"})
	}
	return onLeader(ctx, s, func() (*roostv1.UntrustReleaseKeyResponse, error) {
		full, err := resolveKeyID(s.fsm.TrustedKeys(), id)
		if err != nil {
			return nil, err
		}
		if _, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_DeleteTrustedKey{DeleteTrustedKey: &roostv1.DeleteTrustedKey{Id: full}}}); err != nil {
			return nil, err
		}
		return &roostv1.UntrustReleaseKeyResponse{Id: full}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.UntrustReleaseKeyResponse, error) {
		return roostv1.NewHubServiceClient(c).UntrustReleaseKey(fctx, req)
	})
}

// resolveKeyID finds the one key whose id is id or starts with it.
func resolveKeyID(keys []*roostv1.TrustedKey, id string) (string, error) {
	var matches []string
	for _, k := range keys {
		if k.GetId() == id {
			return id, nil
		}
		if strings.HasPrefix(k.GetId(), id) {
			matches = append(matches, k.GetId())
		}
	}
	switch len(matches) {
	case 0:
		return "", apierror.NotFound("TrustedKey", id)
	case 1:
		return matches[0], nil
	}
	sort.Strings(matches)
	for i, m := range matches {
		matches[i] = m[:16]
	}
	return "", apierror.Invalid("ambiguous key id", apierror.Violation{Field: "id",
		Message: fmt.Sprintf("%q is the start of %d trusted keys: %s", id, len(matches), strings.Join(matches, ", ")),
		Hint:    "give more digits of the id"})
}

// ListTrustedKeys lists the trusted release keys, sorted by id, as the
// leader sees them.
func (s *Server) ListTrustedKeys(ctx context.Context, req *roostv1.ListTrustedKeysRequest) (*roostv1.ListTrustedKeysResponse, error) {
	return onLeader(ctx, s, func() (*roostv1.ListTrustedKeysResponse, error) {
		if _, err := s.node.ReadBarrier(ctx); err != nil {
			return nil, err
		}
		return &roostv1.ListTrustedKeysResponse{Keys: s.fsm.TrustedKeys()}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.ListTrustedKeysResponse, error) {
		return roostv1.NewHubServiceClient(c).ListTrustedKeys(fctx, req)
	})
}

// checkReleaseSignature checks, on the leader, that a release is signed by
// a trusted key. With no key trusted it returns a warning instead (the
// release is accepted). Errors: FailedPrecondition (no trusted key signed
// it; the message names the manifest's key id and how to trust a key),
// InvalidArgument (malformed signature, or the signed manifest does not
// list the artifacts).
func (s *Server) checkReleaseSignature(spec *roostv1.ImageReleaseSpec) (warning string, err error) {
	trusted := s.fsm.TrustedKeys()
	if len(trusted) == 0 {
		return noTrustedKeyWarning, nil
	}
	keys := make([]ed25519.PublicKey, 0, len(trusted))
	for _, k := range trusted {
		pub, err := releasesig.ParsePublicKeyPEM([]byte(k.GetPublicKeyPem()))
		if err != nil {
			return "", fmt.Errorf("trusted key %s: %w", k.GetId(), err) // the FSM checked it
		}
		keys = append(keys, pub)
	}
	_, verr := releasesig.Verify(releasesig.FromImageRelease(spec), keys)
	switch {
	case verr == nil:
		return "", nil
	case errors.Is(verr, releasesig.ErrUntrusted):
		signer := "a key the hub does not trust"
		if id := manifestKeyID(spec.GetManifest()); id != "" {
			signer = "key " + id + " (the keyID in its manifest), which the hub does not trust"
			for _, k := range trusted {
				if strings.HasPrefix(k.GetId(), id) {
					signer = "key " + id + " (the keyID in its manifest), which is trusted, but the signature does not verify: the manifest or the signature was altered"
				}
			}
		}
		return "", apierror.FailedPrecondition("release %s is signed by %s; trusted keys: %s. Trust the signing key with 'roostctl image trust add KEY.pub', "+
			"or sign the release with a trusted key (roost-image release --key)", spec.GetVersion(), signer, shortIDs(trusted))
	case errors.Is(verr, releasesig.ErrMalformedSignature):
		return "", apierror.Invalid("invalid ImageRelease", apierror.Violation{Field: "release.spec.signature", Message: verr.Error(),
			Hint: "send the content of " + release.SignatureFile})
	default:
		return "", apierror.Invalid("invalid ImageRelease", apierror.Violation{Field: "release.spec.manifest", Message: verr.Error(),
			Hint: "take the artifacts from the signed manifest"})
	}
}

// manifestKeyID returns the keyID field of a release manifest, or "".
func manifestKeyID(manifest []byte) string {
	var m release.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil || !state.IsKeyID(m.KeyID) {
		return ""
	}
	return m.KeyID
}

func shortIDs(keys []*roostv1.TrustedKey) string {
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.GetId()[:16])
	}
	return strings.Join(ids, ", ")
}

// ---- peer blob fetch
