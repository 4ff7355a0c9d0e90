package hub

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/bytedance/gopkg/util/gctuner"
)

// TestTuneGC: on a heap far below GCHeapFloor the GC percent rises above
// DefaultGCPercent after a collection (up to maxGCPercent); with $GOGC set
// TuneGC changes nothing.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer gctuner.Tuning(0) // stop the tuner

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	TuneGC()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Fatalf("with GOGC=150 TuneGC set the GC percent to %d", got)
	}

	t.Setenv("GOGC", "")
	debug.SetGCPercent(10)
	TuneGC()
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC() // the tuner runs after each collection
		got := debug.SetGCPercent(-1)
		debug.SetGCPercent(got)
		if got > DefaultGCPercent && got <= maxGCPercent {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d on a small heap, want above %d and at most %d", got, DefaultGCPercent, maxGCPercent)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
