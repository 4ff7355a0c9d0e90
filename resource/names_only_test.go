package resource

import (
	"strings"
	"testing"
)

func TestDecodeNamesOnly(t *testing.T) {
	const in = `apiVersion: roost.io/v1
kind: Pool
metadata:
  name: workers
  labels: {"bad key": x}
spec:
  replicas: lots
  nonsense: 1
status: {phase: x}
---
apiVersion: roost.io/v1
kind: List
items:
  - apiVersion: roost.io/v1
    kind: Server
    metadata: {name: s1}
---
apiVersion: roost.io/v1
kind: Cluster
metadata: {name: 7}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: prod}
`
	ms, err := Decode([]byte(in), "in.yaml", NamesOnly())
	var got []string
	for _, m := range ms {
		got = append(got, m.Kind.Name+"/"+m.Name())
		if s := m.Object.GetPool().GetSpec(); s != nil {
			t.Errorf("spec decoded: %v", s)
		}
	}
	if strings.Join(got, " ") != "Pool/workers Server/s1" {
		t.Errorf("objects %v", got)
	}
	var want = []string{
		`in.yaml:20:18: Cluster "7": metadata.name: expected a name, got integer 7 (name the object to delete with metadata.name)`,
		`in.yaml:22:13: Cluster "prod": apiVersion: unsupported apiVersion "cluster.x-k8s.io/v1beta1" (use "roost.io/v1")`,
	}
	if err == nil || strings.TrimSpace(FormatViolations(err.(Diagnostics))) != strings.Join(want, "\n") {
		t.Errorf("problems:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if m := ms[0]; m.Pos("metadata.name") != (Position{Line: 4, Column: 3}) {
		t.Errorf("position of metadata.name: %v", m.Pos("metadata.name"))
	}
}
