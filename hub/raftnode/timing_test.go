package raftnode

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestSetTimingScalesDefaultsAndKeepsOverrides(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		cfg                        Config
		heartbeat, election, lease time.Duration
	}{
		{"defaults", Config{}, time.Second, time.Second, 500 * time.Millisecond},
		{"multiplier 1", Config{TimingMultiplier: 1}, time.Second, time.Second, 500 * time.Millisecond},
		{"multiplier 5", Config{TimingMultiplier: 5}, 5 * time.Second, 5 * time.Second, 2500 * time.Millisecond},
		{"override wins", Config{TimingMultiplier: 5, ElectionTimeout: 8 * time.Second}, 5 * time.Second, 8 * time.Second, 2500 * time.Millisecond},
	} {
		rc := raft.DefaultConfig()
		rc.LocalID = "hub-1"
		setTiming(rc, tc.cfg)
		if rc.HeartbeatTimeout != tc.heartbeat || rc.ElectionTimeout != tc.election || rc.LeaderLeaseTimeout != tc.lease {
			t.Errorf("%s: heartbeat %s, election %s, lease %s; want %s, %s, %s", tc.name,
				rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, tc.heartbeat, tc.election, tc.lease)
		}
		if err := raft.ValidateConfig(rc); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
