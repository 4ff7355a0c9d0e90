package resource

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Poll intervals of a ReleaseFeed.
const (
	// DefaultFeedPollInterval is spec.pollInterval when unset.
	DefaultFeedPollInterval = time.Hour
	// MinFeedPollInterval is the shortest spec.pollInterval accepted.
	MinFeedPollInterval = time.Minute
)

// FeedURLKind is how a ReleaseFeed's spec.url is read.
type FeedURLKind int

// The kinds of feed URL.
const (
	FeedHTTPS FeedURLKind = iota + 1
	FeedHTTP              // plain http: only with spec.insecure
	FeedDir               // file:///PATH or an absolute directory path
)

// ParseFeedURL classifies a ReleaseFeed's url: an https:// or http://
// URL with a host (returned as is), or a directory (file:///PATH or an
// absolute path, returned as the cleaned path). Errors say what to write.
func ParseFeedURL(raw string) (FeedURLKind, string, error) {
	if strings.HasPrefix(raw, "/") {
		return FeedDir, filepath.Clean(raw), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return 0, "", fmt.Errorf("not a URL: %v", err)
	}
	switch u.Scheme {
	case "https", "http":
		if u.Host == "" {
			return 0, "", fmt.Errorf("%q has no host", raw)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return 0, "", fmt.Errorf("%q has a query or fragment; give the feed's root", raw)
		}
		if u.Scheme == "http" {
			return FeedHTTP, raw, nil
		}
		return FeedHTTPS, raw, nil
	case "file":
		if u.Host != "" && u.Host != "localhost" || !strings.HasPrefix(u.Path, "/") {
			return 0, "", fmt.Errorf("%q: a file URL names an absolute path on the hub, file:///PATH", raw)
		}
		return FeedDir, filepath.Clean(u.Path), nil
	}
	return 0, "", fmt.Errorf("scheme %q is not supported", u.Scheme)
}

// FeedPollInterval is a feed's poll interval: spec.pollInterval, or
// DefaultFeedPollInterval when unset.
func FeedPollInterval(s *roostv1.ReleaseFeedSpec) time.Duration {
	if d := s.GetPollInterval(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return DefaultFeedPollInterval
}

// validateReleaseFeed checks a ReleaseFeed spec: url (https://, http://
// with insecure, file:///PATH or an absolute path), trustedKeys (hex key
// ids or prefixes of at least 16 characters), pollInterval (≥ 1m) and
// channels (DNS labels, no repeats).
func validateReleaseFeed(e *violations, s *roostv1.ReleaseFeedSpec) {
	if s.GetUrl() == "" {
		e.add("spec.url", "is required", `the feed's root, e.g. "https://releases.example.com/roost" or "/srv/roost-feed" (roost-image publish writes it)`)
	} else if k, _, err := ParseFeedURL(s.GetUrl()); err != nil {
		e.add("spec.url", err.Error(), "use https://HOST/PATH, file:///PATH or an absolute directory path")
	} else if k == FeedHTTP && !s.GetInsecure() {
		e.addf("spec.url", "use https://, or set spec.insecure: true to accept plain HTTP (signatures are still checked)",
			"%q is plain http", s.GetUrl())
	}
	for i, id := range s.GetTrustedKeys() {
		if !isHexKeyID(id) || len(id) < 16 {
			e.addf(fmt.Sprintf("spec.trustedKeys[%d]", i), "copy the ID column of 'roostctl image trust list'",
				"%q is not a release key id (at least 16 lower-case hex characters)", id)
		}
	}
	checkDuration(e, "spec.pollInterval", s.GetPollInterval())
	if d := s.GetPollInterval(); d != nil && d.CheckValid() == nil && d.AsDuration() > 0 && d.AsDuration() < MinFeedPollInterval {
		e.addf("spec.pollInterval", `e.g. "15m" or "1h"`, "must be at least %s, got %s", MinFeedPollInterval, d.AsDuration())
	}
	seen := map[string]bool{}
	for i, ch := range s.GetChannels() {
		field := fmt.Sprintf("spec.channels[%d]", i)
		if msgs := validation.IsDNS1123Label(ch); len(msgs) > 0 {
			e.addf(field, `use a name such as "beta"`, "invalid channel %q: %s", ch, strings.Join(msgs, "; "))
		} else if seen[ch] {
			e.addf(field, "list each channel once", "channel %q is listed twice", ch)
		}
		seen[ch] = true
	}
}

// isHexKeyID says whether s is lower-case hex of at most 64 characters.
func isHexKeyID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
