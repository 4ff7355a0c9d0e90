package iso

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// benchPayload is the tree size of BenchmarkISOThroughput (~500 MiB): a
// large initrd-like file, a kernel-like file and many small files.
func benchTree(b *testing.B, dir string) int64 {
	b.Helper()
	mb := int64(500)
	if s := os.Getenv("ROOST_BENCH_ISO_MIB"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			mb = n
		}
	}
	var total int64
	write := func(p string, size int64) {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		for i := range buf {
			buf[i] = byte(i*7 + int(size))
		}
		for left := size; left > 0; {
			n := int64(len(buf))
			if left < n {
				n = left
			}
			if _, err := f.Write(buf[:n]); err != nil {
				b.Fatal(err)
			}
			left -= n
		}
		f.Close()
		total += size
	}
	write("boot/initrd.img", (mb-40)*mib)
	write("boot/vmlinuz", 8*mib)
	for i := 0; i < 64; i++ {
		write(fmt.Sprintf("pool/d%02d/f%03d.bin", i%8, i), mib/2)
	}
	return total
}

// linkTree makes a copy of src built from hard links (WriteISO consumes
// its tree).
func linkTree(b *testing.B, src, dst string) {
	b.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		t := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(t, 0o755)
		}
		return os.Link(p, t)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkISOThroughput writes a ~500 MiB tree as ISO 9660 with Roost's
// writer (go-diskfs) and with xorriso on the same machine, and reports both
// throughputs and their ratio (goal: roost/xorriso >= 1).
func BenchmarkISOThroughput(b *testing.B) {
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		b.Skip("xorriso not installed (apt-get install xorriso): no baseline")
	}
	dir := b.TempDir()
	master := filepath.Join(dir, "master")
	total := benchTree(b, master)
	var roostDur, xorrisoDur time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tree := filepath.Join(dir, fmt.Sprintf("tree%d", i))
		linkTree(b, master, tree)
		out := filepath.Join(dir, "roost.iso")
		os.Remove(out)
		b.StartTimer()
		start := time.Now()
		if err := WriteISO(tree, out, ISOOptions{Epoch: time.Unix(0, 0)}); err != nil {
			b.Fatal(err)
		}
		roostDur += time.Since(start)
		b.StopTimer()
		os.Remove(out)
		xout := filepath.Join(dir, "xorriso.iso")
		os.Remove(xout)
		start = time.Now()
		cmd := exec.Command(xorriso, "-as", "mkisofs", "-quiet", "-o", xout, master)
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("xorriso: %v: %s", err, msg)
		}
		xorrisoDur += time.Since(start)
		os.Remove(xout)
		b.StartTimer()
	}
	b.StopTimer()
	mibTotal := float64(total) / (1 << 20) * float64(b.N)
	r := mibTotal / roostDur.Seconds()
	x := mibTotal / xorrisoDur.Seconds()
	b.ReportMetric(r, "roost-MiB/s")
	b.ReportMetric(x, "xorriso-MiB/s")
	b.ReportMetric(r/x, "roost/xorriso")
	b.SetBytes(total)
}
