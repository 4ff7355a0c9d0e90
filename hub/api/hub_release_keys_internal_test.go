package api

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestResolveKeyID(t *testing.T) {
	keys := []*roostv1.TrustedKey{
		{Id: "abcd" + strings.Repeat("1", 60)},
		{Id: "abcd" + strings.Repeat("2", 60)},
		{Id: "ef01" + strings.Repeat("3", 60)},
	}
	if id, err := resolveKeyID(keys, "ef0"); err != nil || id != keys[2].Id {
		t.Fatalf("unique prefix: %q %v", id, err)
	}
	if id, err := resolveKeyID(keys, keys[1].Id); err != nil || id != keys[1].Id {
		t.Fatalf("whole id: %q %v", id, err)
	}
	_, err := resolveKeyID(keys, "abcd")
	e := apierror.FromError(err)
	if e.Code != codes.InvalidArgument || len(e.Violations) != 1 || e.Violations[0].Field != "id" ||
		!strings.Contains(e.Violations[0].Message, "abcd111111111111, abcd222222222222") {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if _, err := resolveKeyID(keys, "9999"); apierror.Code(err) != codes.NotFound {
		t.Fatalf("unknown: %v", err)
	}
}

func TestManifestKeyID(t *testing.T) {
	for in, want := range map[string]string{
		`{"keyID":"0123456789abcdef"}`: "0123456789abcdef",
		`{"keyID":"not hex"}`:          "",
		`{}`:                           "",
		`{`:                            "",
	} {
		if got := manifestKeyID([]byte(in)); got != want {
			t.Errorf("manifestKeyID(%s) = %q, want %q", in, got, want)
		}
	}
}
