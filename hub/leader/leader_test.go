package leader

import (
	"context"
	"errors"
	"testing"
)

func TestTermBarrierOncePerTerm(t *testing.T) {
	leading, barriers, fail := false, 0, false
	term := Term{IsLeader: func() bool { return leading }, Barrier: func(context.Context) error {
		barriers++
		if fail {
			return errors.New("no quorum")
		}
		return nil
	}}
	ctx := context.Background()
	if ok, err := term.Ready(ctx); ok || err != nil || barriers != 0 {
		t.Fatalf("follower: ok=%v err=%v barriers=%d", ok, err, barriers)
	}
	leading = true
	for i := 0; i < 3; i++ {
		if ok, err := term.Ready(ctx); !ok || err != nil {
			t.Fatalf("leader: ok=%v err=%v", ok, err)
		}
	}
	if barriers != 1 {
		t.Errorf("barriers in one term = %d, want 1", barriers)
	}
	leading = false
	term.Ready(ctx)
	leading, fail = true, true
	if ok, err := term.Ready(ctx); ok || err == nil {
		t.Fatalf("failed barrier: ok=%v err=%v", ok, err)
	}
	fail = false
	if ok, _ := term.Ready(ctx); !ok || barriers != 3 {
		t.Errorf("new term: ok=%v barriers=%d, want a barrier per attempt until one succeeds (3)", ok, barriers)
	}
}
