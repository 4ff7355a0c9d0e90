package feed

import (
	"strings"
	"testing"
)

func TestParseChannelRefusesPathsOutsideTheFeed(t *testing.T) {
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "releases/../../x", "releases//x", ""} {
		data := `{"kind":"ReleaseFeedChannel","channel":"beta","releases":[{"version":"2027.01.0","manifest":"` + p + `","signature":"releases/2027.01.0/release.json.sig"}]}`
		if _, err := ParseChannel("beta", []byte(data)); err == nil || !strings.Contains(err.Error(), "not a clean relative path") {
			t.Errorf("path %q: %v", p, err)
		}
	}
	good := `{"kind":"ReleaseFeedChannel","channel":"beta","releases":[{"version":"2027.01.0","manifest":"releases/2027.01.0/release.json","signature":"releases/2027.01.0/release.json.sig"}]}`
	if _, err := ParseChannel("beta", []byte(good)); err != nil {
		t.Error(err)
	}
	if _, err := ParseChannel("stable", []byte(good)); err == nil {
		t.Error("a channel file of another channel was accepted")
	}
	dup := `{"kind":"ReleaseFeedChannel","channel":"beta","releases":[{"version":"1","manifest":"a","signature":"b"},{"version":"1","manifest":"a","signature":"b"}]}`
	if _, err := ParseChannel("beta", []byte(dup)); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := ParseIndex([]byte(`{"kind":"ReleaseFeedIndex","channels":["Beta"]}`)); err == nil {
		t.Error("a bad channel name was accepted")
	}
}
