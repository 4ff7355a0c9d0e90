package redfish

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/roostfleet/roost/bmc"
)

func TestCredentialsNeverFormat(t *testing.T) {
	opts := Options{Credentials: Credentials{Username: "admin", Password: "hunter2"}}
	for _, s := range []string{
		fmt.Sprint(opts.Credentials), fmt.Sprintf("%v", opts), fmt.Sprintf("%+v", opts), fmt.Sprintf("%#v", opts), fmt.Sprintf("%#v", opts.Credentials),
	} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("formatted options show the password: %s", s)
		}
	}
}

// A BMC that echoes the request body in its error must not make the
// client show the password.
func TestErrorsRedactEchoedPassword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"code":"Base.1.8.GeneralError","message":"bad: %s","@Message.ExtendedInfo":[{"MessageId":"Base.1.8.PropertyValueFormatError","Message":"The value %s is wrong.","Resolution":"Retry."}]}}`,
			strings.ReplaceAll(string(body), `"`, `'`), strings.ReplaceAll(string(body), `"`, `'`))
	}))
	defer srv.Close()
	addr, err := ParseAddress("redfish+http://" + strings.TrimPrefix(srv.URL, "http://") + "/redfish/v1/Systems/1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(addr, Options{Credentials: Credentials{Username: "admin", Password: "hunter2"}, Sessions: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PowerState(context.Background())
	if bmc.Reason(err) != bmc.ReasonRejected {
		t.Fatalf("error %v: reason %s, want Rejected", err, bmc.Reason(err))
	}
	if s := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(s, "hunter2") || !strings.Contains(s, "<redacted>") {
		t.Errorf("error does not redact the password: %s", s)
	}
}

func TestStatusErrorBodies(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		reason string
		text   string
	}{
		{502, "<html><body>Bad Gateway</body></html>", bmc.ReasonServerError, "(HTTP 502): Bad Gateway"},
		{503, "try later", bmc.ReasonServerError, "(HTTP 503): try later"},
		{404, `{"error":{"code":"Base.1.8.ResourceMissingAtURI","message":"The resource at the URI /x was not found."}}`, bmc.ReasonNotFound, "not found (HTTP 404): The resource at the URI /x was not found."},
		{405, "", bmc.ReasonUnsupported, "(HTTP 405): Method Not Allowed"},
		{403, "", bmc.ReasonUnauthorized, "(HTTP 403)"},
		{504, "", bmc.ReasonTimeout, "(HTTP 504)"},
		{409, `{"error":{"code":"Base.1.8.GeneralError","message":"x","@Message.ExtendedInfo":[{"MessageId":"Base.1.8.ResourceInUse","Message":"in use"},{"MessageId":"Base.1.8.Other"}]}}`, bmc.ReasonRejected, "(HTTP 409): in use; Base.1.8.Other"},
	} {
		err := statusError("GET /x", tc.status, []byte(tc.body))
		if got := bmc.Reason(err); got != tc.reason {
			t.Errorf("%d %q: reason %s, want %s", tc.status, tc.body, got, tc.reason)
		}
		if !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%d %q: %q does not say %q", tc.status, tc.body, err, tc.text)
		}
	}
}

// A 200 without a body (as a broken proxy may send) is no resource.
func TestEmptyResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	addr, err := ParseAddress("redfish+http://" + strings.TrimPrefix(srv.URL, "http://") + "/redfish/v1/Systems/1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(addr, Options{Credentials: Credentials{Username: "admin", Password: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PowerState(context.Background())
	if bmc.Reason(err) != bmc.ReasonServerError || !strings.Contains(fmt.Sprint(err), "empty response") {
		t.Fatalf("PowerState = %v (reason %s), want an empty-response ServerError", err, bmc.Reason(err))
	}
}
