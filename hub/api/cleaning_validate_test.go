package api

import (
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestValidateCleaningResult(t *testing.T) {
	long := strings.Repeat("x", 1025)
	for _, tc := range []struct {
		name string
		r    *roostv1.CleaningResult
		want []string // field paths
	}{
		{"good", &roostv1.CleaningResult{Index: 7, Succeeded: true, Disks: []string{"/dev/vda: metadata: …"}}, nil},
		{"no index", &roostv1.CleaningResult{Error: "x"}, []string{"cleaningResult.index"}},
		{"long error", &roostv1.CleaningResult{Index: 1, Error: long}, []string{"cleaningResult.error"}},
		{"too many disks", &roostv1.CleaningResult{Index: 1, Disks: make([]string, 65)}, []string{"cleaningResult.disks"}},
		{"long disk line", &roostv1.CleaningResult{Index: 1, Disks: []string{"ok", long}}, []string{"cleaningResult.disks[1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range ValidateCleaningResult(tc.r) {
				got = append(got, v.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("violations %v, want %v", got, tc.want)
			}
		})
	}
}
