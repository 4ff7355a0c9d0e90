package resource

import (
	"bytes"
	"testing"

	"github.com/roostfleet/roost/resource/resourcetest"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestStripWriteOnly(t *testing.T) {
	cl := resourcetest.Cluster(t)
	orig := proto.Clone(cl)
	got := StripWriteOnly(cl)
	if got == cl {
		t.Fatal("a Cluster with a kubeconfig must come back as a copy")
	}
	if !proto.Equal(cl, orig) {
		t.Error("StripWriteOnly changed its argument")
	}
	if got.GetCluster().GetSpec().GetKubeconfig() != "" {
		t.Error("kubeconfig not cleared")
	}
	// Everything else is kept.
	want := proto.Clone(orig).(*roostv1.Object)
	want.GetCluster().GetSpec().Kubeconfig = ""
	if !proto.Equal(got, want) {
		t.Errorf("StripWriteOnly changed more than the kubeconfig:\n got %v\nwant %v", got, want)
	}
	for _, format := range []string{"yaml", "json"} {
		data, err := Encode([]*roostv1.Object{got}, format)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("kubeconfig")) || bytes.Contains(data, []byte(resourcetest.KubeconfigSecret)) {
			t.Errorf("%s of a stripped Cluster holds the kubeconfig:\n%s", format, data)
		}
	}

	// Objects without write-only fields are passed through as they are.
	objs := resourcetest.SampleObjects()
	out := StripWriteOnlyAll(objs)
	if len(out) != len(objs) {
		t.Fatalf("got %d objects, want %d", len(out), len(objs))
	}
	for i := range objs {
		if (objs[i].GetCluster() != nil) != (out[i] != objs[i]) {
			t.Errorf("object %d: copied %t", i, out[i] != objs[i])
		}
	}
	if &out[0] == &objs[0] {
		t.Error("StripWriteOnlyAll must not write into its argument's slice")
	}
	plain := objs[:2]
	if got := StripWriteOnlyAll(plain); &got[0] != &plain[0] {
		t.Error("without write-only fields the same slice should come back")
	}
	if StripWriteOnly(nil) != nil {
		t.Error("nil")
	}
}
