package resource

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// FuzzDecode feeds arbitrary bytes through everything a manifest goes
// through: Decode (with and without ForApply), ValidateManifests and
// Encode (cli/printers fuzzes its tables and describe). Nothing may panic, every problem must carry a
// message, and what decodes must encode to a fixed point: encoding what
// Decode read from Encode's output gives the same bytes. Plain `go test`
// runs the seeds (examples, bad manifests, a few odd inputs); `go test
// -fuzz FuzzDecode ./resource` explores further.
func FuzzDecode(f *testing.F) {
	for _, glob := range []string{"../examples/*.yaml", "testdata/bad/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	for _, s := range []string{
		"", "---", "~", "[]", "{}", "null", "3", "- - -", "a: &a [*a]", "*x", "kind: List\nitems: [{kind: Pool}]",
		"apiVersion: roost.io/v1\nkind: Pool\nmetadata: {name: p, labels: {? [a] : b}}",
		"apiVersion: roost.io/v1\nkind: Pool\nspec: {rollout: {maxUnavailable: !!int x}}",
		"apiVersion: roost.io/v1\nkind: EnrollmentToken\nspec: {expiresAt: 10000-01-01T00:00:00Z}",
		"apiVersion: roost.io/v1\nkind: MaintenanceWindow\nspec: {duration: 99999999999h}",
		"apiVersion: roost.io/v1\nkind: Pool\n<<: {spec: {}}\n",
		"apiVersion: roost.io/v1\nkind: Lease\nspec: {fencingToken: 18446744073709551616}",
		"\xff\xfe", "\t", "a:\n\t- b", "%YAML 1.1\n---\na: b",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range [][]DecodeOption{nil, {ForApply()}} {
			ms, err := Decode(data, "fuzz.yaml", opts...)
			if err != nil {
				ds, ok := err.(Diagnostics)
				if !ok || len(ds) == 0 {
					t.Fatalf("Decode error is %T with no diagnostics: %v", err, err)
				}
				for _, d := range ds {
					if d.Message == "" {
						t.Fatalf("diagnostic without a message: %+v", d)
					}
				}
			}
			_ = ValidateManifests(ms)
			var objs []*roostv1.Object
			for _, m := range ms {
				objs = append(objs, m.Object)
			}
			for _, format := range []string{"yaml", "json"} {
				out, err := Encode(objs, format)
				if err != nil {
					t.Fatalf("Encode(%s): %v", format, err)
				}
				ms2, err := Decode(out, "again."+format)
				if err != nil {
					t.Fatalf("Decode(Encode(%s)) failed: %v\n%s", format, err, out)
				}
				var objs2 []*roostv1.Object
				for _, m := range ms2 {
					objs2 = append(objs2, m.Object)
				}
				out2, err := Encode(objs2, format)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out, out2) {
					t.Fatalf("Encode is not a fixed point (%s):\n%s\n---- then\n%s", format, out, out2)
				}
			}
		}
	})
}
