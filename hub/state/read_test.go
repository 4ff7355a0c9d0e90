package state

import (
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func TestListLabelSelectors(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(
		clusterObj("c-prod", map[string]string{"env": "prod", "tier": "web"}),
		clusterObj("a-dev", map[string]string{"env": "dev"}),
		clusterObj("b-none", nil),
		clusterObj("d-prod-db", map[string]string{"env": "prod", "tier": "db"}),
	))
	h.mustApply(h.objects(machineClassObj("standard")))
	cases := []struct {
		selector string
		want     []string
		bad      bool
	}{
		{"", []string{"a-dev", "b-none", "c-prod", "d-prod-db"}, false},
		{"env=prod", []string{"c-prod", "d-prod-db"}, false},
		{"env==prod,tier!=db", []string{"c-prod"}, false},
		{"env!=prod", []string{"a-dev", "b-none"}, false},
		{"env in (dev,prod)", []string{"a-dev", "c-prod", "d-prod-db"}, false},
		{"env notin (prod)", []string{"a-dev", "b-none"}, false},
		{"tier", []string{"c-prod", "d-prod-db"}, false},
		{"!tier", []string{"a-dev", "b-none"}, false},
		{"env=staging", nil, false},
		{"env=", nil, false}, // matches an empty value: none here
		{"env in (", nil, true},
		{"===", nil, true},
		{"Bad Key=x", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.selector, func(t *testing.T) {
			objs, idx, err := h.f.List("clusters", tc.selector)
			if tc.bad {
				e := wantCode(t, err, codes.InvalidArgument)
				if len(e.Violations) != 1 || e.Violations[0].Field != "labelSelector" {
					t.Errorf("violations = %v, want one on labelSelector", e.Violations)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range objs {
				names = append(names, resource.NameOf(o))
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("names = %v, want %v", names, tc.want)
			}
			if idx != h.idx {
				t.Errorf("index = %d, want %d", idx, h.idx)
			}
		})
	}
	_, _, err := h.f.List("gizmos", "")
	if e := wantCode(t, err, codes.InvalidArgument); e.Violations[0].Field != "kind" {
		t.Errorf("violations = %v", e.Violations)
	}
}

func TestGetReturnsClones(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(clusterObj("prod", map[string]string{"env": "prod"})))
	o, err := h.f.Get("cl", "prod")
	if err != nil {
		t.Fatal(err)
	}
	o.GetCluster().Metadata.Labels["env"] = "changed"
	o.GetCluster().Spec.ApiEndpoint = "changed"
	objs, _, _ := h.f.List("Cluster", "")
	objs[0].GetCluster().Metadata.Name = "changed"
	again, _ := h.f.Get("Cluster", "prod")
	if again.GetCluster().GetMetadata().GetLabels()["env"] != "prod" || again.GetCluster().GetSpec().GetApiEndpoint() == "changed" {
		t.Errorf("the store was changed through a read: %v", again)
	}
	_, err = h.f.Get("Cluster", "nope")
	wantCode(t, err, codes.NotFound)
	_, err = h.f.Get("gizmo", "x")
	wantCode(t, err, codes.InvalidArgument)
}

// TestConcurrentReads runs reads and watches against a stream of applies;
// run with -race.
func TestConcurrentReads(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(baseObjects()...))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				objs, idx, err := h.f.List("Pool", "")
				if err != nil {
					t.Error(err)
					return
				}
				// A list is a consistent view: every pool's modifyIndex ≤ idx.
				for _, o := range objs {
					if o.GetPool().GetMetadata().GetModifyIndex() > idx {
						t.Errorf("pool modified at %d in a list at index %d", o.GetPool().GetMetadata().GetModifyIndex(), idx)
					}
				}
				_ = h.f.Members()
				_ = h.f.CA()
				_, _ = h.f.Get("Cluster", "prod")
			}
		}()
	}
	for i := 0; i < 200; i++ {
		h.mustApply(h.objects(poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.ImageVersion = string(rune('a' + i%26)) })))
	}
	close(stop)
	wg.Wait()
}
