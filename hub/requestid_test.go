package hub_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Creates that are not idempotent, sent again with the same request ID (a
// client's retry after an unknown outcome, or roostctl --request-id),
// return the first result: the same enrollment token (secret included),
// join token and Machine-less apply, and nothing is made twice. The same
// ID for another request is refused.
func TestRetriedCreatesReturnTheFirstResult(t *testing.T) {
	h := startHub(t, t.TempDir(), hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	admin := dial(t, h.AdminConfigPath(), h.APIAddr())
	ctx := client.WithRequestID(context.Background(), "retry-test-1")

	req := &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600, ServerLabels: map[string]string{"rack": "r1"}}
	first, err := admin.CreateEnrollmentToken(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := admin.CreateEnrollmentToken(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetToken() != first.GetToken() {
		t.Errorf("retry returned token %q, the first %q", again.GetToken(), first.GetToken())
	}
	if objs, _, _ := h.FSM().List("EnrollmentToken", ""); len(objs) != 1 {
		t.Errorf("%d enrollment tokens after a retry, want 1", len(objs))
	}
	// Another request under the same ID.
	_, err = admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 60})
	if apierror.Code(err) != codes.FailedPrecondition {
		t.Errorf("another request with a used ID: %v, want FailedPrecondition", err)
	}
	// Without an ID (and a fresh one per call), two calls make two tokens.
	if _, err := admin.CreateEnrollmentToken(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if objs, _, _ := h.FSM().List("EnrollmentToken", ""); len(objs) != 2 {
		t.Errorf("%d enrollment tokens, want 2", len(objs))
	}

	jctx := client.WithRequestID(context.Background(), "retry-test-2")
	before := len(h.FSM().JoinTokens())
	j1, err := admin.CreateJoinToken(jctx, &roostv1.CreateJoinTokenRequest{TtlSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	j2, err := admin.CreateJoinToken(jctx, &roostv1.CreateJoinTokenRequest{TtlSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if j1.GetToken() != j2.GetToken() || !j1.GetExpiresAt().AsTime().Equal(j2.GetExpiresAt().AsTime()) {
		t.Errorf("retried join token %s (expires %v), first %s (expires %v)", j2.GetId(), j2.GetExpiresAt().AsTime(), j1.GetId(), j1.GetExpiresAt().AsTime())
	}
	if n := len(h.FSM().JoinTokens()) - before; n != 1 {
		t.Errorf("%d join tokens made by a request and its retry, want 1", n)
	}

	// An apply with a modifyIndex precondition, retried after it applied,
	// returns its first result instead of a conflict.
	actx := client.WithRequestID(context.Background(), "retry-test-3")
	if _, err := admin.Apply(context.Background(), &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("prod", "v1.34.4")}}); err != nil {
		t.Fatal(err)
	}
	// The cluster controller records the new Cluster's status at once.
	waitFor(t, "cluster status", func() bool {
		o, err := h.FSM().Get("Cluster", "prod")
		return err == nil && len(o.GetCluster().GetStatus().GetConditions()) > 0
	})
	o, err := h.FSM().Get("Cluster", "prod")
	if err != nil {
		t.Fatal(err)
	}
	upd := cluster("prod", "v1.34.5")
	upd.GetCluster().Metadata.ModifyIndex = o.GetCluster().GetMetadata().GetModifyIndex()
	a1, err := admin.Apply(actx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{upd}})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := admin.Apply(actx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{upd}})
	if err != nil || a2.GetIndex() != a1.GetIndex() || a2.GetResults()[0].GetAction() != "configured" {
		t.Errorf("retried apply: %v %v, want the first result %v", a2, err, a1)
	}

	// A delete retried after it applied answers as the first did, not NotFound.
	dctx := client.WithRequestID(context.Background(), "retry-test-4")
	d1, err := admin.Delete(dctx, &roostv1.DeleteRequest{Kind: "Cluster", Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if d2, err := admin.Delete(dctx, &roostv1.DeleteRequest{Kind: "Cluster", Name: "prod"}); err != nil || d2.GetIndex() != d1.GetIndex() {
		t.Errorf("retried delete: %v %v, want index %d", d2, err, d1.GetIndex())
	}
}
