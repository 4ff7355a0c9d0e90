package agent

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// Keepalive of the agent's connections: an idle-looking connection with an
// open stream is pinged every KeepaliveTime and declared dead when a ping
// is unanswered for KeepaliveTimeout (a member that vanished without
// closing its sockets, or hangs). Together at most 15 s (10 s is the
// least gRPC allows for KeepaliveTime), inside the shortest liveness TTL
// (30 s, with heartbeats every 10 s a silent agent turns Unreachable 18 s
// after its member hung at the earliest): agents of a hung member reach
// another before the leader would mark them Unreachable. The timeout was
// 3 s: a member busy for that long (thousands of agents reconnecting at
// once after a leader kill) lost agents that were fine, whose reconnects
// kept it busy. The hub must permit pings this often (hub/api
// TransportOptions).
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
)

// TransportDialOptions returns the agent's connection settings: keepalive
// pings every KeepaliveTime (dead after KeepaliveTimeout), and lean buffers
// as on the hub (hub/api TransportOptions), since the simulator runs
// thousands of agents in one process: no read buffer of gRPC's own
// (crypto/tls already buffers a whole record; DATA frames of artifact
// downloads go to pooled buffers), a 32 KiB write buffer held only while
// writing, and 64 KiB flow-control windows.
func TransportDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.WithReadBufferSize(0),
		grpc.WithWriteBufferSize(32 << 10),
		grpc.WithSharedWriteBuffer(true),
		grpc.WithInitialWindowSize(64 << 10),
		grpc.WithInitialConnWindowSize(64 << 10),
	}
}

// dialOptions are the options of the agent's connections: TLS without
// a client certificate (anon, to enroll) or with it.
func (a *Agent) dialOptions(anon bool) []grpc.DialOption {
	cfg := a.mtls
	if anon {
		cfg = a.anonTLS
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithUserAgent("roost-agent/" + a.o.Version),
		grpc.WithDisableServiceConfig(),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 15 * time.Second},
			MinConnectTimeout: 10 * time.Second,
		}),
	}
	opts = append(opts, TransportDialOptions()...)
	return append(opts, a.o.DialOptions...)
}

func (a *Agent) dial(addr string, anon bool) (*grpc.ClientConn, error) {
	if a.conn != nil && a.connAddr == addr && a.connAnon == anon {
		return a.conn, nil
	}
	a.dropConn()
	conn, err := grpc.NewClient("passthrough:///"+addr, a.dialOptions(anon)...)
	if err != nil {
		return nil, err
	}
	a.conn, a.connAddr, a.connAnon = conn, addr, anon
	return conn, nil
}

func (a *Agent) dropConn() {
	if a.conn != nil {
		a.conn.Close()
		a.conn = nil
	}
}
