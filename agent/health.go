package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// HealthCheckTimeout bounds one request to a health URL.
const HealthCheckTimeout = 3 * time.Second

// checkHealthURLs asks each of urls (http:// on the Server itself, such
// as the kubelet's http://127.0.0.1:10248/healthz) with GET and fails
// unless every one answers 200 OK; the error names each URL that did not
// and why (connection refused, the status and the start of the body).
func checkHealthURLs(ctx context.Context, c *http.Client, urls []string) error {
	var errs []error
	for _, u := range urls {
		if err := checkHealthURL(ctx, c, u); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkHealthURL(ctx context.Context, c *http.Client, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("health URL %q: not an http:// URL", raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return fmt.Errorf("health URL %s: %w", raw, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("%s: %w", raw, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %q", raw, resp.Status, body)
	}
	return nil
}
