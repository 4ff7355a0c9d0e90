package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/netboot"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// tokenAlphabet is the kubeadm token alphabet.
const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// newEnrollmentToken returns a fresh "<6>.<16>" secret, each character
// uniform over the alphabet (rejection sampling).
func newEnrollmentToken() (string, error) { return enrollmentTokenFrom(rand.Reader) }

// enrollmentTokenFrom makes a "<6>.<16>" secret from the bytes of src
// (random, or derived from a request ID: derivedSource), each character
// uniform over the alphabet when the bytes are (rejection sampling).
func enrollmentTokenFrom(src io.Reader) (string, error) {
	out := make([]byte, 0, 23)
	buf := make([]byte, 64)
	for len(out) < 23 {
		if _, err := io.ReadFull(src, buf); err != nil {
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
	for _, k := range slices.Sorted(maps.Keys(m)) {
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
	if ttl, most := req.GetTtlSeconds(), int64(resource.MaxEnrollmentTokenTTL/time.Second); ttl < 0 || ttl > most {
		vs = append(vs, apierror.Violation{Field: "ttlSeconds", Message: fmt.Sprintf("must be 0 (never expires) to %d (10 years), got %d", most, ttl)})
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
	nb := req.GetNetboot()
	if nb != nil {
		vs = append(vs, checkNetboot(req)...)
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid enrollment token request", vs...)
	}
	if nb != nil && !isForwarded(ctx) {
		if err := s.checkNetbootRelease(nb); err != nil {
			return nil, err
		}
	}
	resp, err := onLeader(ctx, s, func() (*roostv1.CreateEnrollmentTokenResponse, error) {
		for attempt := 0; ; attempt++ {
			secret, err := s.enrollmentSecret(ctx, attempt)
			if err != nil {
				return nil, err
			}
			if nb != nil {
				// the secret of a network boot token is derived from
				// its name, so the boot listener can hand it out
				if secret, err = s.netbootToken(secret); err != nil {
					return nil, err
				}
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
			cmd := &roostv1.Command{Time: timestamppb.New(now), Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
				Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: name}, Spec: spec}, Uid: uuid.NewString(),
			}}}
			if err := s.withRequest(ctx, cmd, req, drawName(attempt)); err != nil {
				return nil, err
			}
			_, err = s.Propose(ctx, cmd)
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
	if err != nil || nb == nil || isForwarded(ctx) {
		return resp, err
	}
	// the member the operator called signs the URL of its own listener
	et := resp.GetEnrollmentToken()
	if want, err := s.netbootToken(resp.GetToken()); err != nil || want != resp.GetToken() {
		// a leader of an older roost-hub ignored netboot and drew a
		// random secret, which no boot listener can hand out
		return nil, apierror.FailedPrecondition("enrollment token %s was created, but not as a network boot token: the leader's roost-hub does not know network boot; "+
			"upgrade every member, then revoke it (roostctl token revoke %s) and try again", et.GetMetadata().GetName(), et.GetMetadata().GetName())
	}
	g := netboot.Grant{TokenID: et.GetMetadata().GetName(), Channel: nb.GetChannel(), Expires: et.GetSpec().GetExpiresAt().AsTime()}
	if nb.GetVersion() != "" {
		g.Release = ImageReleaseName(nb.GetVersion())
	}
	// this member serves the URL from its own state: wait until it has
	// applied the token the leader made
	if err := s.waitForObject(ctx, "EnrollmentToken", g.TokenID); err != nil {
		return nil, err
	}
	if resp.NetbootUrl, err = s.netbootURL(g); err != nil {
		return nil, apierror.FailedPrecondition("enrollment token %s was created, but its network boot URL was not: %v (revoke it: roostctl token revoke %s)", g.TokenID, err, g.TokenID)
	}
	return resp, nil
}

// drawName names the attempt-th draw of a token within one request for
// withRequest and derivedSource: "" for the first, then "2", "3", ….
func drawName(attempt int) string {
	if attempt == 0 {
		return ""
	}
	return strconv.Itoa(attempt + 1)
}

// derivedSource returns the bytes a token created by the request in ctx
// is made from at its attempt-th draw: derived from the request ID with
// the hub CA's key (ca.Authority.DeriveSecret), so that a retry of the
// request, on any member, makes the same token and the FSM finds it
// applied (state.RulesRequestIDs) instead of creating a second one; nil
// when the request has no ID (then the token is random).
func (s *Server) derivedSource(ctx context.Context, purpose string, attempt, n int) (io.Reader, error) {
	id := requestID(ctx)
	if id == "" {
		return nil, nil
	}
	authority, err := s.authority()
	if err != nil {
		return nil, err
	}
	b, err := authority.DeriveSecret(purpose, id+"/"+drawName(attempt), n)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// enrollmentSecret is the attempt-th draw of an enrollment token for the
// request in ctx: derived from its request ID (derivedSource), or random.
func (s *Server) enrollmentSecret(ctx context.Context, attempt int) (string, error) {
	src, err := s.derivedSource(ctx, "enrollment-token", attempt, 1024)
	if err != nil || src == nil {
		if err == nil {
			return newEnrollmentToken()
		}
		return "", err
	}
	return enrollmentTokenFrom(src)
}

// RevokeEnrollmentToken revokes a token; enrolled Servers are not affected.
func (s *Server) RevokeEnrollmentToken(ctx context.Context, req *roostv1.RevokeEnrollmentTokenRequest) (*roostv1.RevokeEnrollmentTokenResponse, error) {
	if req.GetName() == "" {
		return nil, apierror.Invalid("no token named", apierror.Violation{Field: "name", Message: "is required"})
	}
	return onLeader(ctx, s, func() (*roostv1.RevokeEnrollmentTokenResponse, error) {
		if _, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: req.GetName()}}}); err != nil {
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
	default:
		vs = append(vs, checkBMCAction(req)...)
	}
	if len(req.GetReason()) > MaxMessage {
		vs = append(vs, apierror.Violation{Field: "reason", Message: fmt.Sprintf("at most %d bytes", MaxMessage)})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid server update", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.UpdateServerResponse, error) {
		if srv := s.serverOnLeader(req.GetName()); srv != nil {
			switch req.GetAction() {
			case roostv1.ServerAction_SERVER_ACTION_APPROVE:
				if !awaitsApproval(srv) {
					// Nothing to approve: it needs no approval (its token
					// did not ask for one) or has it already. Recording an
					// approval nobody asked for would only move indexes.
					setResult(ctx, state.ActionUnchanged)
					return &roostv1.UpdateServerResponse{Server: stripServer(srv)}, nil
				}
			case roostv1.ServerAction_SERVER_ACTION_DENY, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION:
				if err := s.recordLastSeen(ctx, srv); err != nil {
					return nil, err
				}
			}
		}
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
			Name: req.GetName(), Action: req.GetAction(), Reason: req.GetReason(), SetLabels: req.GetSetLabels(), RemoveLabels: req.GetRemoveLabels(),
			Power: req.GetPower(), BootDevice: req.GetBootDevice(), MediaDigest: req.GetMediaDigest(), OperationId: uuid.NewString(),
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
		return &roostv1.UpdateServerResponse{Server: stripServer(o.GetServer())}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.UpdateServerResponse, error) {
		var hdr metadata.MD
		resp, err := roostv1.NewHubServiceClient(c).UpdateServer(fctx, req, grpc.Header(&hdr))
		if v := hdr.Get(ResultHeader); len(v) > 0 {
			setResult(ctx, v[0]) // pass the leader's answer on
		}
		return resp, err
	})
}

// ResultHeader is the response header (gRPC metadata) in which UpdateServer
// says what it did: "configured" when the Server changed, "unchanged" when
// it already was as asked (a second cordon, removing a label it does not
// have, approving a Server that awaits no approval). roostctl prints
// "server/NAME unchanged" (or "already cordoned") for the latter. A hub
// that does not send it is older; clients then assume a change.
const ResultHeader = "roost-result"

// setResult sets the ResultHeader of the call in ctx.
func setResult(ctx context.Context, action string) {
	if action != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(ResultHeader, action))
	}
}

// serverOnLeader is Server name as this member (the leader) has applied
// it, or nil.
func (s *Server) serverOnLeader(name string) *roostv1.Server {
	o, err := s.fsm.Get("Server", name)
	if err != nil {
		return nil
	}
	return o.GetServer()
}

// awaitsApproval says whether an approval would change srv: it is held
// for approval (PendingApproval), or still Enrolling with a token that
// requires one (Approved=False). A decommissioned Server is left to the
// FSM, which refuses it.
func awaitsApproval(srv *roostv1.Server) bool {
	if srv.GetStatus().GetState() == state.ServerDecommissioned {
		return true
	}
	c := state.FindCondition(srv.GetStatus().GetConditions(), state.ConditionApproved)
	return c != nil && c.GetStatus() != "True"
}

// recordLastSeen writes, before srv is denied or decommissioned, the last
// heartbeat this leader heard from it into status.lastSeen: once
// Decommissioned, liveness no longer tracks the Server (its agent is
// refused), so the recorded time is what 'roostctl get servers' and
// 'describe server' show from then on. Liveness itself writes only
// transitions; this is one more entry per operator action, and none when
// the leader heard nothing newer than the record (or the Server is
// Claimed or Decommissioned already, which the FSM refuses or keeps).
func (s *Server) recordLastSeen(ctx context.Context, srv *roostv1.Server) error {
	st := srv.GetStatus()
	if st.GetState() == state.ServerClaimed || st.GetState() == state.ServerDecommissioned {
		return nil
	}
	name := srv.GetMetadata().GetName()
	seen, _, ok := s.tracker.LastSeen(name)
	if !ok || (st.GetLastSeen() != nil && !seen.After(st.GetLastSeen().AsTime())) {
		return nil
	}
	_, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
		Changes: []*roostv1.ReachabilityChange{{Name: name, Reachable: st.GetReachability() != state.Unreachable, LastSeen: timestamppb.New(seen)}},
	}}})
	return err
}

// checkServerDelete refuses, on the leader, to delete a Server that is
// still in service, unless force: deleting drops only the hub's record;
// the machine keeps running, and its agent, whose certificate names a
// Server the hub no longer knows, records it again (Reregister), held for
// approval, or, once its certificate expired, needs a new enrollment by
// hand. A Decommissioned (or denied) Server, whose agent is refused
// already, may go. A Claimed one is refused with the
// command that releases it, also with force (the FSM refuses deleting a
// Server a Machine holds anyway). An unknown name is left to the delete
// itself (NotFound).
//
// HubService.Delete calls it for kind Server before proposing the
// DeleteObject.
func (s *Server) checkServerDelete(name string, force bool) error {
	srv := s.serverOnLeader(name)
	if srv == nil {
		return nil
	}
	st := srv.GetStatus()
	switch st.GetState() {
	case state.ServerDecommissioned:
		return nil
	case state.ServerClaimed:
		m := s.fsm.MachineOf(name)
		var pool *roostv1.Pool
		if p := m.GetSpec().GetPool(); p != "" {
			if o, err := s.fsm.Get("Pool", p); err == nil {
				pool = o.GetPool()
			}
		}
		return apierror.FailedPrecondition("%s", state.ClaimedRefusal(srv, m, pool,
			fmt.Sprintf("decommission it ('roostctl server decommission %s') and delete it", name)))
	}
	if force {
		s.log.Warn("deleting a Server that is not decommissioned (--force); from its next heartbeat its agent records it again, for approval", "server", name, "state", st.GetState())
		return nil
	}
	agent := "its agent is " + orState(st.GetReachability(), "not heard from yet")
	if seen, recent, ok := s.tracker.LastSeen(name); ok && recent {
		agent = "its agent is connected (last heartbeat within the last second)"
		if d := s.now().Sub(seen).Round(time.Second); d >= time.Second {
			agent = fmt.Sprintf("its agent is connected (last heartbeat %s ago)", d)
		}
	}
	return apierror.FailedPrecondition("Server %s is %s and %s: deleting it would drop only the hub's record, and the running "+
		"agent would record the server again, waiting for approval, without its pool and labels. Take it out of service first with "+
		"'roostctl server decommission %s' (its agent is then refused and stops reporting), then delete it; "+
		"or delete it anyway with 'roostctl delete server %s --force'", name, orState(st.GetState(), "in no state"), agent, name, name)
}

func orState(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
