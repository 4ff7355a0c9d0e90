package printers

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/resource/resourcetest"
)

// FuzzPrint feeds arbitrary bytes through resource.Decode (with and
// without ForApply) and prints what decodes with PrintTable (wide) and
// Describe: neither may panic or fail. Plain `go test` runs the seeds (the
// examples and resource's bad manifests); `go test -fuzz FuzzPrint
// ./cli/printers` explores further.
func FuzzPrint(f *testing.F) {
	for _, glob := range []string{"../../examples/*.yaml", "../../resource/testdata/bad/*.yaml"} {
		files, _ := filepath.Glob(glob)
		if len(files) == 0 {
			f.Fatalf("no seed files match %s", glob)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: roost.io/v1\nkind: MaintenanceWindow\nspec: {duration: 99999999999h}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range [][]resource.DecodeOption{nil, {resource.ForApply()}} {
			ms, _ := resource.Decode(data, "fuzz.yaml", opts...)
			var objs []*roostv1.Object
			for _, m := range ms {
				objs = append(objs, m.Object)
			}
			if err := PrintTable(&bytes.Buffer{}, objs, true, resourcetest.Now); err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if err := Describe(&bytes.Buffer{}, o, resourcetest.Now); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
