package api

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// tokenAlphabet is the kubeadm token alphabet.
const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// newEnrollmentToken returns a fresh "<6>.<16>" secret, each character
// uniform over the alphabet (rejection sampling).
func newEnrollmentToken() (string, error) {
	out := make([]byte, 0, 23)
	buf := make([]byte, 64)
	for len(out) < 23 {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, c := range buf {
			if len(out) == 6 {
				out = append(out, '.')
			}
			if len(out) == 23 {
				break
			}
			if int(c) < 256-256%len(tokenAlphabet) {
				out = append(out, tokenAlphabet[int(c)%len(tokenAlphabet)])
			}
		}
	}
	return string(out), nil
}

func checkLabelMap(field string, m map[string]string) []apierror.Violation {
	var vs []apierror.Violation
	for _, k := range sortedStrings(m) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			vs = append(vs, apierror.Violation{Field: field + "[" + k + "]", Message: "invalid label key: " + msgs[0]})
		}
		if msgs := validation.IsValidLabelValue(m[k]); len(msgs) > 0 {
			vs = append(vs, apierror.Violation{Field: field + "[" + k + "]", Message: "invalid label value: " + msgs[0]})
		}
		if state.IsDerivedLabel(k) {
			vs = append(vs, apierror.Violation{Field: field + "[" + k + "]", Message: "is computed by the hub from the inventory and cannot be set"})
		}
	}
	return vs
}

// CreateEnrollmentToken makes a token; the secret is returned once.
func (s *Server) CreateEnrollmentToken(ctx context.Context, req *roostv1.CreateEnrollmentTokenRequest) (*roostv1.CreateEnrollmentTokenResponse, error) {
	var vs []apierror.Violation
	if req.GetTtlSeconds() < 0 {
		vs = append(vs, apierror.Violation{Field: "ttlSeconds", Message: fmt.Sprintf("must be ≥ 0 (0: never expires), got %d", req.GetTtlSeconds())})
	}
	if req.GetMaxUses() < 0 {
		vs = append(vs, apierror.Violation{Field: "maxUses", Message: fmt.Sprintf("must be ≥ 0 (0: unlimited), got %d", req.GetMaxUses())})
	}
	if p := req.GetPool(); p != "" {
		if msgs := validation.IsDNS1123Label(p); len(msgs) > 0 {
			vs = append(vs, apierror.Violation{Field: "pool", Message: msgs[0]})
		}
	}
	vs = append(vs, checkLabelMap("serverLabels", req.GetServerLabels())...)
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid enrollment token request", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.CreateEnrollmentTokenResponse, error) {
		for attempt := 0; ; attempt++ {
			secret, err := newEnrollmentToken()
			if err != nil {
				return nil, err
			}
			name, hash, err := ParseEnrollmentToken(secret)
			if err != nil {
				return nil, err
			}
			now := s.now()
			spec := &roostv1.EnrollmentTokenSpec{SecretSha256: hash, MaxUses: req.GetMaxUses(), Pool: req.GetPool(),
				ServerLabels: req.GetServerLabels(), RequireApproval: req.GetRequireApproval()}
			if ttl := req.GetTtlSeconds(); ttl > 0 {
				spec.ExpiresAt = timestamppb.New(now.Add(time.Duration(ttl) * time.Second))
			}
			_, err = s.Propose(ctx, &roostv1.Command{Time: timestamppb.New(now), Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
				Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: name}, Spec: spec}, Uid: uuid.NewString(),
			}}})
			if apierror.Code(err) == codes.AlreadyExists && attempt < 3 {
				continue // a 6-character id collided; draw again
			}
			if err != nil {
				return nil, err
			}
			o, err := s.fsm.Get("EnrollmentToken", name)
			if err != nil {
				return nil, err
			}
			s.log.Info("enrollment token created", "token", name)
			return &roostv1.CreateEnrollmentTokenResponse{Token: secret, EnrollmentToken: o.GetEnrollmentToken()}, nil
		}
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.CreateEnrollmentTokenResponse, error) {
		return roostv1.NewHubServiceClient(c).CreateEnrollmentToken(fctx, req)
	})
}

// RevokeEnrollmentToken revokes a token; enrolled Servers are not affected.
func (s *Server) RevokeEnrollmentToken(ctx context.Context, req *roostv1.RevokeEnrollmentTokenRequest) (*roostv1.RevokeEnrollmentTokenResponse, error) {
	if req.GetName() == "" {
		return nil, apierror.Invalid("no token named", apierror.Violation{Field: "name", Message: "is required"})
	}
	return onLeader(ctx, s, func() (*roostv1.RevokeEnrollmentTokenResponse, error) {
		if _, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: req.GetName()}}}); err != nil {
			return nil, err
		}
		o, err := s.fsm.Get("EnrollmentToken", req.GetName())
		if err != nil {
			return nil, err
		}
		return &roostv1.RevokeEnrollmentTokenResponse{EnrollmentToken: o.GetEnrollmentToken()}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.RevokeEnrollmentTokenResponse, error) {
		return roostv1.NewHubServiceClient(c).RevokeEnrollmentToken(fctx, req)
	})
}

// UpdateServer applies an operator's change to a Server.
func (s *Server) UpdateServer(ctx context.Context, req *roostv1.UpdateServerRequest) (*roostv1.UpdateServerResponse, error) {
	var vs []apierror.Violation
	if req.GetName() == "" {
		vs = append(vs, apierror.Violation{Field: "name", Message: "is required"})
	}
	switch req.GetAction() {
	case roostv1.ServerAction_SERVER_ACTION_UNSPECIFIED:
		vs = append(vs, apierror.Violation{Field: "action", Message: "is required"})
	case roostv1.ServerAction_SERVER_ACTION_LABEL:
		vs = append(vs, checkLabelMap("setLabels", req.GetSetLabels())...)
		for i, k := range req.GetRemoveLabels() {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				vs = append(vs, apierror.Violation{Field: fmt.Sprintf("removeLabels[%d]", i), Message: "invalid label key: " + msgs[0]})
			} else if state.IsDerivedLabel(k) {
				vs = append(vs, apierror.Violation{Field: fmt.Sprintf("removeLabels[%d]", i), Message: k + " is computed by the hub from the inventory and cannot be removed"})
			}
		}
		if len(req.GetSetLabels()) == 0 && len(req.GetRemoveLabels()) == 0 {
			vs = append(vs, apierror.Violation{Field: "setLabels", Message: "give labels to set or remove"})
		}
	}
	if len(req.GetReason()) > MaxMessage {
		vs = append(vs, apierror.Violation{Field: "reason", Message: fmt.Sprintf("at most %d bytes", MaxMessage)})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid server update", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.UpdateServerResponse, error) {
		if _, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
			Name: req.GetName(), Action: req.GetAction(), Reason: req.GetReason(), SetLabels: req.GetSetLabels(), RemoveLabels: req.GetRemoveLabels(),
		}}}); err != nil {
			return nil, err
		}
		o, err := s.fsm.Get("Server", req.GetName())
		if err != nil {
			return nil, err
		}
		return &roostv1.UpdateServerResponse{Server: o.GetServer()}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.UpdateServerResponse, error) {
		return roostv1.NewHubServiceClient(c).UpdateServer(fctx, req)
	})
}

func sortedStrings(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
