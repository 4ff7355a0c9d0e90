package install

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/diskfs/go-diskfs/backend"
)

// tidyFAT32 makes the FAT32 file system go-diskfs wrote at byte start of
// w, which is partition sector startLBA, agree with dosfstools' fsck.fat:
//   - the boot sector's (and its backup's) hidden-sector count is the
//     partition's first sector;
//   - ".." of a first-level folder names the root as cluster 0, not the
//     root's cluster (go-diskfs v1.9 writes the latter);
//   - FSInfo holds the real free-cluster count and next free cluster
//     instead of "unknown".
//
// It reads the FAT and the root folder, so it is cheap on a 512 MiB ESP.
func tidyFAT32(w backend.WritableFile, start int64, startLBA uint32) error {
	bs := make([]byte, 512)
	if _, err := w.ReadAt(bs, start); err != nil {
		return err
	}
	le16 := func(b []byte, o int) int64 { return int64(binary.LittleEndian.Uint16(b[o:])) }
	le32 := func(b []byte, o int) int64 { return int64(binary.LittleEndian.Uint32(b[o:])) }
	if !bytes.Equal(bs[510:512], []byte{0x55, 0xaa}) || !bytes.Equal(bs[82:90], []byte("FAT32   ")) {
		return fmt.Errorf("not a FAT32 boot sector")
	}
	bps, spc, reserved, nfats := le16(bs, 11), int64(bs[13]), le16(bs, 14), int64(bs[16])
	total, fatSectors, root := le32(bs, 32), le32(bs, 36), uint32(le32(bs, 44))
	fsinfo, backup := le16(bs, 48), le16(bs, 50)
	if bps == 0 || spc == 0 || fatSectors == 0 {
		return fmt.Errorf("FAT32 boot sector: zero geometry")
	}
	clusterBytes := bps * spc
	dataStart := start + (reserved+nfats*fatSectors)*bps
	clusters := (total - reserved - nfats*fatSectors) / spc
	if entries := fatSectors * bps / 4; entries < clusters+2 {
		// go-diskfs v1.9.4 sizes the FAT too small for some volume sizes.
		return fmt.Errorf("FAT32 layout is broken: %d clusters but room for %d FAT entries (choose another ESP size)", clusters, entries-2)
	}

	// Hidden sectors, in the boot sector and its backup.
	var hidden [4]byte
	binary.LittleEndian.PutUint32(hidden[:], startLBA)
	if _, err := w.WriteAt(hidden[:], start+28); err != nil {
		return err
	}
	if backup > 0 && backup < reserved {
		if _, err := w.WriteAt(hidden[:], start+backup*bps+28); err != nil {
			return err
		}
	}

	fat := make([]byte, fatSectors*bps)
	if _, err := w.ReadAt(fat, start+reserved*bps); err != nil && err != io.EOF {
		return err
	}
	next := func(c uint32) uint32 {
		if int64(c)*4+4 > int64(len(fat)) {
			return 0x0fffffff
		}
		return binary.LittleEndian.Uint32(fat[c*4:]) & 0x0fffffff
	}
	clusterOff := func(c uint32) int64 { return dataStart + (int64(c)-2)*clusterBytes }

	// ".." of first-level folders.
	buf := make([]byte, clusterBytes)
	seen := map[uint32]bool{}
	for c := root; c >= 2 && c < 0x0ffffff8 && !seen[c]; c = next(c) {
		seen[c] = true
		if _, err := w.ReadAt(buf, clusterOff(c)); err != nil {
			return err
		}
		for e := 0; e+32 <= len(buf); e += 32 {
			ent := buf[e : e+32]
			if ent[0] == 0 {
				break
			}
			if ent[0] == 0xe5 || ent[11] == 0x0f || ent[11]&0x10 == 0 || ent[0] == '.' {
				continue
			}
			sub := uint32(le16(ent, 20))<<16 | uint32(le16(ent, 26))
			if sub < 2 {
				continue
			}
			dot := make([]byte, 64)
			if _, err := w.ReadAt(dot, clusterOff(sub)); err != nil {
				return err
			}
			dd := dot[32:64]
			if string(dd[0:11]) == "..         " && (uint32(le16(dd, 20))<<16|uint32(le16(dd, 26))) == root {
				if _, err := w.WriteAt(make([]byte, 2), clusterOff(sub)+32+20); err != nil {
					return err
				}
				if _, err := w.WriteAt(make([]byte, 2), clusterOff(sub)+32+26); err != nil {
					return err
				}
			}
		}
	}

	// FSInfo: free clusters and the next free one.
	free, nextFree := uint32(0), uint32(0xffffffff)
	for c := uint32(2); int64(c) < clusters+2; c++ {
		if next(c) == 0 {
			free++
			if nextFree == 0xffffffff {
				nextFree = c
			}
		}
	}
	var info [8]byte
	binary.LittleEndian.PutUint32(info[0:], free)
	binary.LittleEndian.PutUint32(info[4:], nextFree)
	for _, s := range []int64{fsinfo, backup + 1} {
		if s <= 0 || s >= reserved || s == 1 && backup == 0 {
			continue
		}
		sig := make([]byte, 4)
		if _, err := w.ReadAt(sig, start+s*bps); err != nil {
			return err
		}
		if string(sig) != "RRaA" {
			continue
		}
		if _, err := w.WriteAt(info[:], start+s*bps+488); err != nil {
			return err
		}
	}
	return nil
}
