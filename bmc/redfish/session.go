package redfish

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/roostfleet/roost/bmc"
)

// defaultSessionsPath is where services keep their Sessions collection when
// the service root does not link it.
const defaultSessionsPath = "/redfish/v1/SessionService/Sessions"

// login returns the current session's token, creating a session when there
// is none.
func (c *Client) login(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" {
		return c.token, nil
	}
	// The service root is readable without authentication.
	path := defaultSessionsPath
	var root ServiceRoot
	if _, raw, err := c.roundTrip(ctx, "GET /redfish/v1", http.MethodGet, "/redfish/v1", nil, "", nil); err == nil {
		if json.Unmarshal(raw, &root) == nil && root.Links.Sessions != nil && root.Links.Sessions.ODataID != "" {
			path = root.Links.Sessions.ODataID
		}
	}
	op := "POST " + path
	header, _, err := c.roundTrip(ctx, op, http.MethodPost, path,
		SessionRequest{UserName: c.opts.Credentials.Username, Password: c.opts.Credentials.Password}, "", nil)
	if err != nil {
		return "", err
	}
	token := header.Get("X-Auth-Token")
	if token == "" {
		return "", &Error{Op: op, Kind: bmc.ErrServer, Detail: "the session response has no X-Auth-Token"}
	}
	c.token = token
	c.sessionURI = ""
	if loc := header.Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil {
			c.sessionURI = u.Path
		}
	}
	return token, nil
}

// dropToken forgets a refused session token; false when there was none.
func (c *Client) dropToken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	had := c.token != ""
	c.token, c.sessionURI = "", ""
	return had
}
