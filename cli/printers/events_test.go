package printers

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/resource/resourcetest"
)

func eventObj(name string, created uint64, last time.Duration, reason, msg string) *roostv1.Object {
	ts := timestamppb.New(resourcetest.Now.Add(-last))
	return resource.Wrap(&roostv1.Event{Metadata: &roostv1.ObjectMeta{Name: name, CreateIndex: created},
		Spec:   &roostv1.EventSpec{InvolvedObject: &roostv1.EventObject{Kind: "Pool", Name: "workers"}, Type: "Normal", Reason: reason, Message: msg},
		Status: &roostv1.EventStatus{Count: 1, FirstTimestamp: ts, LastTimestamp: ts}})
}

// describe ends with the object's last MaxDescribeEvents Events, the
// newest last; other objects are left out; none is "<none>".
func TestDescribeEvents(t *testing.T) {
	var objs []*roostv1.Object
	for i := range MaxDescribeEvents + 2 {
		// Names and create indexes in the opposite order of last seen.
		objs = append(objs, eventObj(fmt.Sprintf("ev-%d-0", 100-i), uint64(100-i), time.Duration(i)*time.Minute, fmt.Sprintf("Step%d", i), "step\twith a tab"))
	}
	objs = append(objs, resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "not-an-event"}}))
	var buf bytes.Buffer
	if err := DescribeEvents(&buf, objs, resourcetest.Now); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "testdata/print/describe-events.golden", buf.Bytes())
	buf.Reset()
	if err := DescribeEvents(&buf, nil, resourcetest.Now); err != nil || buf.String() != "Events:\t<none>\n" {
		t.Errorf("no events: %q %v", buf.String(), err)
	}
}
