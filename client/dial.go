package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// KeepaliveTime is how often an idle-looking connection with active streams
// is pinged, and KeepaliveTimeout how long a ping may go unanswered before
// the connection is considered dead. The hub's server must allow it:
// keepalive.EnforcementPolicy{MinTime: <= KeepaliveTime}, or it answers
// with GOAWAY "too_many_pings".
const (
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// serviceConfig balances calls over every member (round_robin only picks
// members whose connection is ready, so a dead member is skipped) and
// retries reads and streams that fail with UNAVAILABLE before reaching a
// server, on another member when one is ready. Writes get no retry policy
// of gRPC's: gRPC would also resend a write whose connection dropped after
// it was sent (it may have been applied); retryWrite retries them instead.
// gRPC's transparent retries (a request that never left, or that the
// server refused unprocessed) stay on for all.
const serviceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [
      {"service": "roost.v1.HubService", "method": "Get"},
      {"service": "roost.v1.HubService", "method": "List"},
      {"service": "roost.v1.HubService", "method": "ListMembers"},
      {"service": "roost.v1.HubService", "method": "ListJoinTokens"},
      {"service": "roost.v1.HubService", "method": "StatArtifact"},
      {"service": "roost.v1.HubService", "method": "ListTrustedKeys"},
      {"service": "roost.v1.HubService", "method": "Watch"},
      {"service": "roost.v1.HubService", "method": "SaveSnapshot"},
      {"service": "grpc.health.v1.Health"}
    ],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// scheme is the resolver scheme of connections made by Dial; each
// connection registers its own resolver (grpc.WithResolvers), so nothing is
// global.
const scheme = "roost"

// MaxMessageBytes is the largest response a client accepts (64 MiB).
const MaxMessageBytes = 64 << 20

// Dial returns a gRPC client connection to the hub members in hubs, or in
// cfg.Hubs when hubs is empty. It authenticates with cfg's client
// certificate (none when cfg has none: only join/enroll then work) and
// trusts only cfg's CA, with TLS ServerName tlsconfig.ServerName.
//
// Calls are spread over all members (round_robin); members that refuse
// connections are skipped. Reads failing with UNAVAILABLE are retried up
// to 5 attempts with 0.1s–1s backoff, and then, for unary calls with a
// deadline, again until the deadline (retryUnavailable: a leader election
// takes longer). Writes (IsWrite) carry a request ID (RequestIDKey; fresh,
// or from WithRequestID or WithRequestIDs) and are retried only when
// no attempt can have been applied, or with that ID, which the hub applies
// at most once; a write whose outcome stays unknown fails with an
// *OutcomeUnknownError (retryWrite). Write RPCs may land on any member:
// the hub forwards them to the leader.
//
// Dial does not connect; the first call does, and ctx only aborts Dial
// itself when already done. opts are appended to Dial's own options (e.g.
// interceptors). The caller must Close the returned connection.
func Dial(ctx context.Context, cfg *Config, hubs []string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New("roost dial: no configuration")
	}
	if len(hubs) == 0 {
		hubs = cfg.Hubs
	}
	if len(hubs) == 0 {
		return nil, errors.New("roost dial: no hub addresses (hubs)")
	}
	if err := validateHubs(hubs); err != nil {
		return nil, fmt.Errorf("roost dial: %w", err)
	}
	tlsCfg, err := cfg.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("roost dial: %w", err)
	}

	addrs := make([]resolver.Address, len(hubs))
	for i, h := range hubs {
		addrs[i] = resolver.Address{Addr: h}
	}
	r := manual.NewBuilderWithScheme(scheme)
	r.InitialState(resolver.State{Addresses: addrs})

	all := []grpc.DialOption{
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithChainUnaryInterceptor(addRequestID, retryUnavailable),
		// Lists of a large fleet exceed gRPC's 4 MiB default.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                KeepaliveTime,
			Timeout:             KeepaliveTimeout,
			PermitWithoutStream: false,
		}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  500 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   10 * time.Second, // a member that comes back is used again soon
			},
			MinConnectTimeout: 10 * time.Second,
		}),
	}
	all = append(all, opts...)
	conn, err := grpc.NewClient(r.Scheme()+":///"+tlsconfig.ServerName, all...)
	if err != nil {
		return nil, fmt.Errorf("roost dial: %w", err)
	}
	return conn, nil
}
