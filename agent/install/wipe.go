package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"golang.org/x/sys/unix"
	"unsafe"
)

// Wipe modes (MachineClass spec.cleaning.mode).
const (
	// WipeMetadata zeroes the partition tables at both ends of the disk
	// (MBR, primary and backup GPT) and the first and last MiB of every
	// GPT partition, where file systems, RAID and LVM keep their
	// signatures (as wipefs(8) finds them): nothing on the disk can be
	// found or mounted any more.
	WipeMetadata = "metadata"
	// WipeDiscard discards every block (BLKDISCARD; zeros written where
	// the disk cannot discard), then zeroes the metadata regions, since a
	// discarded block may still read back its old bytes.
	WipeDiscard = "discard"
	// WipeZero writes zeros over the whole disk.
	WipeZero = "zero"
)

// wipeEdge is how much Wipe zeroes at each end of the disk and of each
// partition.
const wipeEdge = 1 << 20

// zeroChunk is the size of each write of zeros.
const zeroChunk = 4 << 20

// Wipe wipes disk dev by mode (WipeMetadata, WipeDiscard, WipeZero) and
// returns one line saying what it did, e.g. "/dev/vda: metadata: Roost
// GPT (2 partitions: ext4, FAT) wiped". The disk is opened with
// Disks.OpenForWipe (not exclusively: a partition may still be held by a
// file system that was shut down). Errors name dev and the step; ctx ends
// a long zeroing between chunks.
func Wipe(ctx context.Context, d Disks, dev, mode string) (string, error) {
	switch mode {
	case WipeMetadata, WipeDiscard, WipeZero:
	default:
		return "", fmt.Errorf("wipe %s: unknown mode %q (want metadata, discard or zero)", dev, mode)
	}
	f, err := d.OpenForWipe(ctx, dev)
	if err != nil {
		return "", fmt.Errorf("wipe %s: %w", dev, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", fmt.Errorf("wipe %s: size: %w", dev, err)
	}
	if size == 0 {
		return "", fmt.Errorf("wipe %s: the disk has no size (no medium?)", dev)
	}
	found := describeContents(f, size)
	var did string
	switch mode {
	case WipeZero:
		if err := zeroRange(ctx, f, 0, size); err != nil {
			return "", fmt.Errorf("wipe %s: %w", dev, err)
		}
		did = fmt.Sprintf("zeros written over %s", FormatSize(size))
	case WipeDiscard:
		how, err := discard(ctx, f, size)
		if err != nil {
			return "", fmt.Errorf("wipe %s: %w", dev, err)
		}
		if err := zeroMetadata(ctx, f, size); err != nil {
			return "", fmt.Errorf("wipe %s: %w", dev, err)
		}
		did = how + ", partition tables and signatures zeroed"
	case WipeMetadata:
		if err := zeroMetadata(ctx, f, size); err != nil {
			return "", fmt.Errorf("wipe %s: %w", dev, err)
		}
		did = "partition tables and signatures zeroed"
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("wipe %s: flush: %w", dev, err)
	}
	line := fmt.Sprintf("%s: %s: %s (it held %s)", dev, mode, did, found)
	if err := rereadPartitions(f); err != nil {
		line += "; the kernel keeps its old partition devices until the next boot: " + err.Error()
	}
	return line, nil
}

// partitionRanges returns the byte ranges [start, end) of the GPT
// partitions of f (512- or 4096-byte sectors), or nil when it holds no
// readable GPT.
func partitionRanges(f *os.File) [][2]int64 {
	st := file.New(f, true)
	for _, ss := range []int{512, 4096} {
		t, err := gpt.Read(st, ss, ss)
		if err != nil {
			continue
		}
		var out [][2]int64
		for _, p := range t.Partitions {
			if p.Type == gpt.Unused || p.End < p.Start {
				continue
			}
			out = append(out, [2]int64{int64(p.Start) * int64(ss), (int64(p.End) + 1) * int64(ss)})
		}
		return out
	}
	return nil
}

// describeContents says what f holds before the wipe: "a Roost GPT (2
// partitions: FAT, ext4)", "a GPT (1 partition: nothing recognised)", a
// signature (see signature) or "nothing recognised".
func describeContents(f *os.File, size int64) string {
	st := file.New(f, true)
	for _, ss := range []int{512, 4096} {
		t, err := gpt.Read(st, ss, ss)
		if err != nil {
			continue
		}
		what := "a GPT"
		if isRoost(t) {
			what = "a Roost GPT"
		}
		var sigs []string
		for _, r := range partitionRanges(f) {
			s := signature(io.NewSectionReader(f, r[0], r[1]-r[0]), r[1]-r[0])
			switch s {
			case "":
				s = "nothing recognised"
			case "a file system on the whole disk (boot sector)":
				s = "a FAT, NTFS or exFAT file system"
			}
			sigs = append(sigs, s)
		}
		return fmt.Sprintf("%s, %d partitions: %s", what, len(sigs), joinOr(sigs, "none"))
	}
	if s := signature(f, size); s != "" {
		return s
	}
	return "nothing recognised"
}

func joinOr(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	out := s[0]
	for _, x := range s[1:] {
		out += ", " + x
	}
	return out
}

// zeroMetadata zeroes the first and last wipeEdge bytes of every GPT
// partition, then of the disk (the tables last: the partitions are found
// through them).
func zeroMetadata(ctx context.Context, f *os.File, size int64) error {
	ranges := partitionRanges(f)
	ranges = append(ranges, [2]int64{0, size})
	for _, r := range ranges {
		start, end := max(r[0], 0), min(r[1], size)
		if end <= start {
			continue
		}
		head := min(end-start, wipeEdge)
		if err := zeroRange(ctx, f, start, head); err != nil {
			return err
		}
		if tail := max(end-wipeEdge, start+head); tail < end {
			if err := zeroRange(ctx, f, tail, end-tail); err != nil {
				return err
			}
		}
	}
	return nil
}

// zeroRange writes zeros over [off, off+n) of f.
func zeroRange(ctx context.Context, f *os.File, off, n int64) error {
	buf := make([]byte, min(n, zeroChunk))
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(n, int64(len(buf)))
		if _, err := f.WriteAt(buf[:k], off); err != nil {
			return fmt.Errorf("writing zeros at byte %d: %w", off, err)
		}
		off, n = off+k, n-k
	}
	return nil
}

// discard discards all of f: BLKDISCARD on a block device, a punched
// hole in an image file; zeros where neither works. It says which.
func discard(ctx context.Context, f *os.File, size int64) (string, error) {
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.Mode()&os.ModeDevice != 0 {
		err = blkdiscard(f, size)
	} else {
		err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, size)
	}
	if err == nil {
		return fmt.Sprintf("%s discarded", FormatSize(size)), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EINVAL) {
		return "", fmt.Errorf("discard: %w", err)
	}
	if err := zeroRange(ctx, f, 0, size); err != nil {
		return "", err
	}
	return fmt.Sprintf("the disk cannot discard (%v): zeros written over %s", err, FormatSize(size)), nil
}

// blkdiscard discards bytes [0, size) of block device f (BLKDISCARD takes
// a {start, length} pair of uint64).
func blkdiscard(f *os.File, size int64) error {
	r := [2]uint64{0, uint64(size)}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKDISCARD, uintptr(unsafe.Pointer(&r[0]))); e != 0 {
		return e
	}
	return nil
}

// rereadPartitions asks the kernel to re-read the partition table of
// block device f (BLKRRPART), so the wiped partitions' devices go; image
// files need nothing. EBUSY means a partition is still held.
func rereadPartitions(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeDevice == 0 {
		return nil
	}
	if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0); err != nil {
		return fmt.Errorf("BLKRRPART: %w", err)
	}
	return nil
}

// HoldsRoost says whether disk dev holds Roost's partition table (as
// Prepare writes it); false when it holds anything else or cannot be
// opened for writing.
func HoldsRoost(ctx context.Context, d Disks, dev string) bool {
	f, err := d.OpenForWipe(ctx, dev)
	if err != nil {
		return false
	}
	defer f.Close()
	st := file.New(f, true)
	for _, ss := range []int{512, 4096} {
		if t, err := gpt.Read(st, ss, ss); err == nil {
			return isRoost(t)
		}
	}
	return false
}
