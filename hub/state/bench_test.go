package state

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkApply measures ApplyObjects of one Pool (a create each time,
// with reference checks), reported as objects/s. Commands are encoded
// before the timer starts; decoding is part of Apply and is measured.
func BenchmarkApply(b *testing.B) {
	h := newHarness(b, Options{})
	h.mustApply(h.objects(baseObjects()...))
	logs := make([]*raft.Log, b.N)
	for i := range logs {
		c := h.objects(poolObj(fmt.Sprintf("pool-%d", i), "prod"))
		c.Time = timestamppb.New(t0)
		logs[i] = &raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: mustMarshal(b, c)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, l := range logs {
		if res := h.f.Apply(l).(*ApplyResult); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
}
