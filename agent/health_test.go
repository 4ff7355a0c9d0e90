package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckHealthURLs(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "[-]syncloop failed", http.StatusInternalServerError)
	}))
	defer bad.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/healthz"
	closed.Close()
	c := (&Host{}).withDefaults().HTTPClient
	ctx := context.Background()

	if err := checkHealthURLs(ctx, c, nil); err != nil {
		t.Fatalf("no URLs: %v", err)
	}
	if err := checkHealthURLs(ctx, c, []string{ok.URL + "/healthz"}); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	err := checkHealthURLs(ctx, c, []string{ok.URL, bad.URL + "/healthz", closedURL, "https://x/healthz"})
	if err == nil {
		t.Fatal("unhealthy URLs passed")
	}
	for _, want := range []string{bad.URL + "/healthz: 500 Internal Server Error: \"[-]syncloop failed\\n\"", closedURL + ": ", "connection refused", `health URL "https://x/healthz": not an http:// URL`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), ok.URL+":") {
		t.Errorf("error names the healthy URL: %v", err)
	}
}
