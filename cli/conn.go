package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/client"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// hubConn is an open connection to the hub.
type hubConn struct {
	conn *grpc.ClientConn
	hub  roostv1.HubServiceClient
}

func (c *hubConn) Close() error { return c.conn.Close() }

// debugf prints a line to standard error with --verbose.
func (o *options) debugf(format string, a ...any) {
	if o.verbose {
		fmt.Fprintf(o.Err, "roostctl: "+format+"\n", a...)
	}
}

// loadConfig reads the client configuration from --config, $ROOST_CONFIG or
// ~/.roost/config.
func (o *options) loadConfig() (*client.Config, error) {
	path, source := o.configPath, "--config"
	if path == "" {
		path = client.DefaultPath()
		source = "default"
		if os.Getenv(client.EnvConfig) != "" {
			source = "$" + client.EnvConfig
		}
	}
	o.configSource = path
	o.debugf("reading client configuration %s (%s)", path, source)
	cfg, err := client.LoadConfig(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if isHubDataDir(filepath.Dir(path)) {
				return nil, usageErrorf("no client configuration at %s yet\n"+
					"  %s is a hub's data dir: a new hub writes admin.conf there once it has\n"+
					"  elected itself leader, a moment after it starts; retry in a few seconds", path, filepath.Dir(path))
			}
			return nil, usageErrorf("no client configuration at %s\n"+
				"  A new hub writes one to DATA_DIR/admin.conf: pass it with --config FILE,\n"+
				"  set ROOST_CONFIG=FILE, or copy it to ~/.roost/config", path)
		}
		return nil, usageError{err}
	}
	return cfg, nil
}

// isHubDataDir says whether dir looks like a roost-hub data dir (it holds
// the member's node-id file).
func isHubDataDir(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "node-id"))
	return err == nil && st.Mode().IsRegular()
}

// checkHubFlag checks the addresses given with --hub, so that a mistake is
// reported as a --hub problem (not as one of the configuration's hubs).
func checkHubFlag(hubs []string) error {
	seen := map[string]bool{}
	for _, h := range hubs {
		if h == "" {
			return usageErrorf("--hub %q: empty address (remove the extra comma)", strings.Join(hubs, ","))
		}
		host, port, err := net.SplitHostPort(h)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return usageErrorf("--hub %q: not host:port (write the API address of a hub member, e.g. 10.0.0.1:7443)", h)
		}
		if seen[h] {
			return usageErrorf("--hub: %q is given twice", h)
		}
		seen[h] = true
	}
	return nil
}

// connect loads the configuration and dials the hub. The connection is
// lazy: the first call connects, failing over between members.
func (o *options) connect(ctx context.Context) (*hubConn, error) {
	cfg, err := o.loadConfig()
	if err != nil {
		return nil, err
	}
	if err := checkHubFlag(o.hubs); err != nil {
		return nil, err
	}
	hubs := o.hubs
	if len(hubs) == 0 {
		hubs = cfg.Hubs
	}
	o.tried = hubs
	o.debugf("hub members: %s", strings.Join(hubs, ", "))
	conn, err := client.Dial(ctx, cfg, o.hubs,
		grpc.WithChainUnaryInterceptor(o.logUnary),
		grpc.WithChainStreamInterceptor(o.logStream))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// --timeout ran out (or Ctrl-C) before the first call: not a usage problem.
			return nil, o.wrapCallError(err)
		}
		return nil, usageError{err}
	}
	return &hubConn{conn: conn, hub: roostv1.NewHubServiceClient(conn)}, nil
}

// withTimeout bounds one command's calls by --timeout.
// open bounds parent by --timeout and connects to the hub; done closes the
// connection and releases the timeout. On error nothing needs releasing.
func (o *options) open(parent context.Context) (ctx context.Context, conn *hubConn, done func(), err error) {
	return o.openWithin(parent, o.timeout)
}

// openWithin is open bounded by timeout instead of --timeout.
func (o *options) openWithin(parent context.Context, timeout time.Duration) (ctx context.Context, conn *hubConn, done func(), err error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	conn, err = o.connect(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, conn, func() { conn.Close(); cancel() }, nil
}

func (o *options) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.timeout)
}

// wrapCallError adds where roostctl looked for the hub to transport
// failures, and turns a local deadline into the gRPC code it stands for.
func (o *options) wrapCallError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := grpcStatus(err)
	if !ok {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			err = status.Error(codes.DeadlineExceeded, err.Error())
		case errors.Is(err, context.Canceled):
			err = status.Error(codes.Canceled, err.Error())
		default:
			return err
		}
		st, _ = grpcStatus(err)
	}
	switch st.Code() {
	case codes.Unavailable:
		msg := st.Message()
		if problem := tlsProblem(msg); problem != "" {
			return usageErrorf("TLS with the hub failed: %s\n  %s: is %s the admin.conf of the hub at %s?",
				oneLine(msg), problem, o.configSource, strings.Join(o.tried, ", "))
		}
		if strings.Contains(msg, " was removed from the hub; ") {
			// A removed member answers for itself only.
			return unreachableHint{hint: fmt.Sprintf("tried %s (from %s): ask a member that is still in the hub (--hub HOST:PORT)",
				strings.Join(o.tried, ", "), o.hubSource()), err: err}
		}
		if hubAnswered(msg) {
			return unreachableHint{hint: "a hub member answered but could not serve the request: the hub may be electing a leader " +
				"(retry in a few seconds), or more than half of its voters are down (see 'roostctl hub members')", err: err}
		}
		hint := fmt.Sprintf("tried %s (from %s); is roost-hub running there?", strings.Join(o.tried, ", "), o.hubSource())
		if len(o.hubs) == 0 {
			hint += " --hub overrides the list"
		}
		return unreachableHint{hint: hint, err: err}
	case codes.DeadlineExceeded:
		return unreachableHint{hint: fmt.Sprintf("waited %s (--timeout) for %s", o.timeout, strings.Join(o.tried, ", ")), err: err}
	case codes.ResourceExhausted:
		// A message above gRPC's size limit, refused by either side.
		if tooLarge := tooLargeError(st); tooLarge != nil {
			return tooLarge
		}
	}
	return err
}

// tlsProblem recognises a failed TLS handshake caused by certificates that
// do not belong together (a client configuration of another hub), and says
// which side refused; it returns "" for other transport failures.
func tlsProblem(msg string) string {
	switch {
	case strings.Contains(msg, "x509:"):
		return "the hub's certificate is not signed by the CA in the client configuration"
	case strings.Contains(msg, "remote error: tls: unknown certificate authority"),
		strings.Contains(msg, "remote error: tls: bad certificate"),
		strings.Contains(msg, "remote error: tls: certificate required"):
		return "the hub refused the client certificate of the client configuration"
	}
	return ""
}

// hubAnswered says whether an Unavailable message came from a hub member
// (no leader yet, leadership changed, …), which asks to be retried, rather
// than from a connection that failed.
func hubAnswered(msg string) bool {
	return strings.HasSuffix(msg, "; retry") || strings.HasSuffix(msg, "; retry on another member")
}

func (o *options) hubSource() string {
	if len(o.hubs) > 0 {
		return "--hub"
	}
	return o.configSource
}

// logUnary logs each attempt of a call with --verbose: its code, for a
// failed write what it says about the write ("not applied", "outcome
// unknown"), and its request ID.
func (o *options) logUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !o.verbose {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	start := time.Now()
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	what := status.Code(err).String()
	if err != nil && client.IsWrite(method) {
		switch client.OutcomeOf(err, p.Addr != nil) {
		case client.NotApplied:
			what += " (not applied)"
		case client.Unknown:
			what += " (outcome unknown)"
		}
	}
	if id := client.RequestIDOf(ctx); id != "" {
		what += ", request " + id
	}
	o.debugf("%s: %s in %s", method, what, time.Since(start).Round(time.Millisecond))
	return err
}

func (o *options) logStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	o.debugf("%s: opening stream", method)
	return streamer(ctx, desc, cc, method, opts...)
}
