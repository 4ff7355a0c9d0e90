package raftnode

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no") }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// A stopped Raft's Apply returns Raft's errorFuture, which neverQueued
// must recognise (it pins the unexported type's name); a queued entry's
// future is not one.
func TestNeverQueued(t *testing.T) {
	conf := raft.DefaultConfig()
	conf.LocalID = "a"
	conf.Logger = hclog.NewNullLogger()
	store := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport("a")
	r, err := raft.NewRaft(conf, nopFSM{}, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "a"}}}).Error(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); r.State() != raft.Leader; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
	}
	queued := r.Apply([]byte("x"), time.Second)
	if err := queued.Error(); err != nil || neverQueued(queued) {
		t.Fatalf("a queued entry's future: err %v, neverQueued %v", err, neverQueued(queued))
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	f := r.Apply([]byte("y"), time.Second)
	if !errors.Is(f.Error(), raft.ErrRaftShutdown) || !neverQueued(f) {
		t.Fatalf("Apply after Shutdown: %v, neverQueued %v (type %T): the raft library changed", f.Error(), neverQueued(f), f)
	}
}

func TestClassifyApply(t *testing.T) {
	for _, c := range []struct {
		err     error
		queued  bool
		unknown bool
	}{
		{raft.ErrEnqueueTimeout, false, false},
		{raft.ErrRaftShutdown, false, false},
		{raft.ErrNotLeader, true, false},
		{raft.ErrLeadershipTransferInProgress, true, false},
		{raft.ErrLeadershipLost, true, true},
		{raft.ErrRaftShutdown, true, true}, // may come after the entry committed
		{fmt.Errorf("store: %w", io.ErrShortWrite), true, true},
	} {
		err := classifyApply(c.err, c.queued)
		if IsOutcomeUnknown(err) != c.unknown || !errors.Is(err, c.err) {
			t.Errorf("classifyApply(%v, queued %v) = %v, want unknown %v", c.err, c.queued, err, c.unknown)
		}
	}
	if classifyApply(nil, true) != nil {
		t.Error("nil error")
	}
}
