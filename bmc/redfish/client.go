package redfish

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/roostfleet/roost/bmc"
)

// DefaultTimeout bounds each request when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// maxBody is the most of a response body read (Redfish resources are small).
const maxBody = 4 << 20

// Credentials are a BMC account. They are never formatted: String and
// GoString hide them, so a stray %v cannot log them.
type Credentials struct {
	Username, Password string
}

// String hides the credentials.
func (Credentials) String() string { return "<credentials>" }

// GoString hides the credentials.
func (Credentials) GoString() string { return "redfish.Credentials{<hidden>}" }

// Options configure a Client.
type Options struct {
	Credentials Credentials
	// Insecure skips verification of the BMC's TLS certificate. Many BMCs
	// ship self-signed certificates; prefer RootCAs.
	Insecure bool
	// RootCAs verify the BMC's certificate; nil means the system roots.
	RootCAs *x509.CertPool
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration
	// Sessions logs in with a Redfish session (POST to the SessionService's
	// Sessions, then X-Auth-Token) instead of sending Basic credentials with
	// every request. Close logs out.
	Sessions bool
	// Logger, when set, gets one debug record per request: method, path,
	// status and duration (never headers or bodies).
	Logger *slog.Logger
	// Transport replaces the HTTP transport (tests); its TLS settings are
	// then its own.
	Transport http.RoundTripper
}

// Client talks to the Redfish service of one server's BMC. It is safe for
// concurrent use.
type Client struct {
	addr    Address
	opts    Options
	http    *http.Client
	timeout time.Duration

	mu         sync.Mutex
	token      string // X-Auth-Token of the current session
	sessionURI string // the session's @odata.id, deleted by Close
}

var _ bmc.BMC = (*Client)(nil)

// New returns a client for the ComputerSystem at addr. It does not contact
// the BMC.
func New(addr Address, opts Options) (*Client, error) {
	if addr.Scheme != "https" && addr.Scheme != "http" || addr.Host == "" || addr.SystemPath == "" {
		return nil, errors.New("redfish: incomplete address (use ParseAddress)")
	}
	if opts.Credentials.Username == "" {
		return nil, errors.New("redfish: no user name")
	}
	rt := opts.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, InsecureSkipVerify: opts.Insecure, MinVersion: tls.VersionTLS12} //nolint:gosec // Insecure is the operator's explicit choice
		t.Proxy = nil
		rt = t
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{
		addr:    addr,
		opts:    opts,
		timeout: timeout,
		http: &http.Client{
			Transport: rt,
			// Redfish services redirect rarely; never resend credentials
			// to another host.
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if req.URL.Host != via[0].URL.Host {
					return errors.New("redirect to another host refused")
				}
				return nil
			},
		},
	}, nil
}

// Address is the client's BMC address.
func (c *Client) Address() Address { return c.addr }

// response is what do returns of a successful request.
type response struct {
	header http.Header
}

// do sends one request to path (an @odata.id) with body (JSON-encoded
// unless nil) and decodes a 2xx response into out (unless nil). ifMatch,
// when set, is sent as If-Match. A session client whose token is refused
// logs in again once.
func (c *Client) do(ctx context.Context, method, path string, body, out any, ifMatch string) (*response, error) {
	resp, err := c.doOnce(ctx, method, path, body, out, ifMatch)
	var rerr *Error
	if c.opts.Sessions && errors.As(err, &rerr) && rerr.StatusCode == http.StatusUnauthorized && c.dropToken() {
		resp, err = c.doOnce(ctx, method, path, body, out, ifMatch)
	}
	return resp, c.redact(err)
}

func (c *Client) doOnce(ctx context.Context, method, path string, body, out any, ifMatch string) (*response, error) {
	op := method + " " + path
	var auth func(*http.Request)
	if c.opts.Sessions {
		token, err := c.login(ctx)
		if err != nil {
			return nil, err
		}
		auth = func(r *http.Request) { r.Header.Set("X-Auth-Token", token) }
	} else {
		auth = func(r *http.Request) { r.SetBasicAuth(c.opts.Credentials.Username, c.opts.Credentials.Password) }
	}
	header, raw, err := c.roundTrip(ctx, op, method, path, body, ifMatch, auth)
	if err != nil {
		return nil, err
	}
	if out != nil && method == http.MethodGet && len(bytes.TrimSpace(raw)) == 0 {
		return nil, &Error{Op: op, Kind: bmc.ErrServer, Detail: "empty response"}
	}
	if out != nil && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, &Error{Op: op, Kind: bmc.ErrServer, Detail: "response is not the expected JSON: " + err.Error()}
		}
	}
	return &response{header: header}, nil
}

// roundTrip sends one request and returns the headers and body of a 2xx
// response, or an *Error.
func (c *Client) roundTrip(ctx context.Context, op, method, path string, body any, ifMatch string, auth func(*http.Request)) (http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, fmt.Errorf("redfish: %s: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.addr.url(path), rd)
	if err != nil {
		return nil, nil, &Error{Op: op, Kind: bmc.ErrRejected, Detail: "bad request path"}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	if auth != nil {
		auth(req)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		e := transportError(op, err)
		if e.Kind == bmc.ErrTimeout {
			e.Detail = fmt.Sprintf("no answer within %s", time.Since(start).Round(time.Millisecond))
		}
		c.log(ctx, method, path, 0, time.Since(start), e.Kind)
		return nil, nil, e
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err == nil && ctx.Err() != nil {
		// net/http may still hand over a response that raced with the
		// deadline; past it, the answer does not count.
		err = ctx.Err()
	}
	c.log(ctx, method, path, resp.StatusCode, time.Since(start), err)
	if err != nil {
		e := transportError(op, err)
		if e.Kind == bmc.ErrTimeout {
			e.Detail = fmt.Sprintf("no answer within %s", time.Since(start).Round(time.Millisecond))
		}
		return nil, nil, e
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, nil, statusError(op, resp.StatusCode, raw)
	}
	return resp.Header, raw, nil
}

func (c *Client) log(ctx context.Context, method, path string, status int, d time.Duration, err error) {
	if c.opts.Logger == nil {
		return
	}
	attrs := []slog.Attr{slog.String("bmc", c.addr.String()), slog.String("method", method), slog.String("path", path), slog.Duration("duration", d)}
	if status != 0 {
		attrs = append(attrs, slog.Int("status", status))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", c.redactString(err.Error())))
	}
	c.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "redfish request", attrs...)
}

// redact removes the password from err's text, should a BMC echo it back.
func (c *Client) redact(err error) error {
	var e *Error
	if !errors.As(err, &e) || c.opts.Credentials.Password == "" {
		return err
	}
	e.Detail = c.redactString(e.Detail)
	for i := range e.Messages {
		e.Messages[i].Message = c.redactString(e.Messages[i].Message)
		e.Messages[i].Resolution = c.redactString(e.Messages[i].Resolution)
	}
	return err
}

func (c *Client) redactString(s string) string {
	if p := c.opts.Credentials.Password; p != "" {
		s = strings.ReplaceAll(s, p, "<redacted>")
	}
	return s
}

// Close ends the Redfish session, if any. The client may be used again (it
// logs in anew).
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	token, uri := c.token, c.sessionURI
	c.token, c.sessionURI = "", ""
	c.mu.Unlock()
	if token == "" || uri == "" {
		return nil
	}
	_, _, err := c.roundTrip(ctx, "DELETE "+uri, http.MethodDelete, uri, nil, "", func(r *http.Request) { r.Header.Set("X-Auth-Token", token) })
	return c.redact(err)
}
