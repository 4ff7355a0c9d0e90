package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/test/harness"
)

// BenchmarkArtifactPush measures upload throughput through the hub's API
// server (the one agents hold their streams on, with its lean connection
// buffers): one PushArtifact of 256 MiB in 1 MiB messages, as `roostctl
// image push` sends them, over TLS on loopback to a single in-process
// member that writes the blob to disk and hashes it.
func BenchmarkArtifactPush(b *testing.B) {
	if testing.Short() {
		b.Skip("writes 256 MiB per run: run `make bench`")
	}
	const size, chunk = 256 << 20, 1 << 20
	c := harness.StartInProcess(b, harness.InProcessOptions{Voters: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	leader := c.Leader(ctx)
	cancel()
	if leader == nil {
		b.Fatal("no leader")
	}
	hc := c.Dial(b, []string{leader.APIAddr()})
	data := make([]byte, size)
	var best float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rand.Read(data) // a new blob each time: the store keeps finished ones
		sum := sha256.Sum256(data)
		digest := hex.EncodeToString(sum[:])
		b.StartTimer()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), maxRun)
		stream, err := hc.PushArtifact(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < size; off += chunk {
			req := &roostv1.PushArtifactRequest{Data: data[off : off+chunk]}
			if off == 0 {
				req.Sha256, req.Size = digest, size
			}
			if err := stream.Send(req); err != nil {
				b.Fatal(err)
			}
		}
		resp, err := stream.CloseAndRecv()
		cancel()
		if err != nil || resp.GetSize() != size {
			b.Fatalf("push: %v (stored %d of %d)", err, resp.GetSize(), size)
		}
		best = max(best, size/time.Since(start).Seconds()/(1<<20))
	}
	b.SetBytes(size)
	b.ReportMetric(best, "best-MiB/s")
	report(b, "artifact push through the hub API server: best %.0f MiB/s (256 MiB, 1 MiB messages, TLS on loopback)", best)
}
