package printers

import (
	"bytes"
	"strings"
	"testing"

	"github.com/roostfleet/roost/resource/resourcetest"
)

// TestDescribeNeverShowsKubeconfig: describe says the kubeconfig is there,
// and nothing of it.
func TestDescribeNeverShowsKubeconfig(t *testing.T) {
	var buf bytes.Buffer
	if err := Describe(&buf, resourcetest.Cluster(t), resourcetest.Now); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "Kubeconfig:             <redacted>\n") {
		t.Errorf("describe should show the kubeconfig as <redacted>:\n%s", out)
	}
	for _, s := range []string{resourcetest.KubeconfigSecret, "roost@prod", "current-context"} {
		if strings.Contains(out, s) {
			t.Errorf("describe shows %q of the kubeconfig:\n%s", s, out)
		}
	}
}
