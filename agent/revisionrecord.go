package agent

import (
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/roostfleet/roost/internal/atomicfile"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// saveRevision records spec in STATE (RevisionsDir/N.json).
func saveRevision(root string, spec *roostv1.RevisionSpec) error {
	dir := filepath.Join(root, RevisionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	data, err := protojson.Marshal(spec)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.json", spec.GetNumber())), data, 0o600)
}

func loadRevision(root string, n int64) (*roostv1.RevisionSpec, error) {
	data, err := os.ReadFile(filepath.Join(root, RevisionsDir, fmt.Sprintf("%d.json", n)))
	if err != nil {
		return nil, err
	}
	spec := &roostv1.RevisionSpec{}
	return spec, protojson.Unmarshal(data, spec)
}
