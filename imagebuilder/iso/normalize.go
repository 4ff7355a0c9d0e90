package iso

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"
)

const sector = 2048

// normalizeISO rewrites every timestamp go-diskfs stamps into an ISO 9660
// image (volume descriptor dates and the recording date of every directory
// record, in the primary and Joliet trees) to t, so equal inputs give
// byte-identical images. It returns the volume size in bytes from the
// primary volume descriptor.
func normalizeISO(f *os.File, t time.Time) (int64, error) {
	t = t.UTC()
	vdDate := []byte(fmt.Sprintf("%04d%02d%02d%02d%02d%02d00", t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()))
	vdDate = append(vdDate, 0)
	unset := append([]byte("0000000000000000"), 0)
	recDate := []byte{byte(t.Year() - 1900), byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second()), 0}

	var volumeSize int64
	vd := make([]byte, sector)
	for s := int64(16); ; s++ {
		if _, err := f.ReadAt(vd, s*sector); err != nil {
			return 0, fmt.Errorf("read volume descriptor %d: %w", s, err)
		}
		if string(vd[1:6]) != "CD001" {
			return 0, fmt.Errorf("sector %d is not a volume descriptor", s)
		}
		typ := vd[0]
		if typ == 255 {
			break
		}
		if typ != 1 && typ != 2 {
			continue
		}
		if typ == 1 {
			volumeSize = int64(binary.LittleEndian.Uint32(vd[80:84])) * int64(binary.LittleEndian.Uint16(vd[128:130]))
		}
		copy(vd[813:830], vdDate) // creation
		copy(vd[830:847], vdDate) // modification
		copy(vd[847:864], unset)  // expiration
		copy(vd[864:881], vdDate) // effective
		root := vd[156 : 156+34]
		copy(root[18:25], recDate)
		if _, err := f.WriteAt(vd, s*sector); err != nil {
			return 0, err
		}
		extent := binary.LittleEndian.Uint32(root[2:6])
		size := binary.LittleEndian.Uint32(root[10:14])
		if err := normalizeDir(f, extent, size, recDate, map[uint32]bool{}); err != nil {
			return 0, err
		}
	}
	if volumeSize == 0 {
		return 0, fmt.Errorf("no primary volume descriptor")
	}
	return volumeSize, nil
}

func normalizeDir(f *os.File, extent, size uint32, date []byte, seen map[uint32]bool) error {
	if seen[extent] {
		return nil
	}
	seen[extent] = true
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, int64(extent)*sector); err != nil && err != io.EOF {
		return fmt.Errorf("read directory at %d: %w", extent, err)
	}
	type child struct{ extent, size uint32 }
	var children []child
	for off := 0; off < len(buf); {
		l := int(buf[off])
		if l == 0 {
			off = (off/sector + 1) * sector
			continue
		}
		if off+l > len(buf) || l < 34 {
			break
		}
		rec := buf[off : off+l]
		copy(rec[18:25], date)
		nameLen := int(rec[32])
		name := rec[33 : 33+nameLen]
		isSpecial := nameLen == 1 && (name[0] == 0 || name[0] == 1)
		if rec[25]&2 != 0 && !isSpecial {
			children = append(children, child{binary.LittleEndian.Uint32(rec[2:6]), binary.LittleEndian.Uint32(rec[10:14])})
		}
		off += l
	}
	if _, err := f.WriteAt(buf, int64(extent)*sector); err != nil {
		return err
	}
	for _, c := range children {
		if err := normalizeDir(f, c.extent, c.size, date, seen); err != nil {
			return err
		}
	}
	return nil
}
