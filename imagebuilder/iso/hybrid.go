package iso

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
)

// The isohybrid layout, after xorriso's -isohybrid-mbr with
// -isohybrid-gpt-basdat, so the ISO also boots when written to a USB stick:
//
//   - LBA 0 (512-byte sectors), the MBR: the boot code of isohdpfx.bin (432
//     bytes), which BIOS runs from a disk; at 432 the 512-byte sector of
//     isolinux.bin (uint64, little-endian), where that code finds it; a
//     disk signature; partition 1, active, type 0 (so no OS mounts it),
//     over the whole image; partition 2, type 0xEF, over the El Torito EFI
//     image (boot/efi.img), which UEFI firmware boots as an ESP.
//   - A GPT (LBA 1 and a backup in the last 33 sectors) with one partition,
//     an EFI System Partition over the same EFI image, for tools and
//     firmware that read GPTs. The MBR is not protective (no 0xEE entry),
//     so MBR-reading firmware uses partition 2.
//
// ISO 9660 leaves its first 32 KiB (the system area) to such use; the
// image grows by the backup GPT and is padded to whole MiB (64 heads × 32
// sectors: whole cylinders, as isohybrid does). The volume space size of
// the volume descriptors counts the padding, as xorriso's does.

const (
	hybridCodeSize = 432     // boot code bytes of the MBR taken from isohdpfx.bin
	hybridAlign    = 1 << 20 // image size multiple: one 64×32 cylinder
	gptTailSectors = 33      // backup partition array (128 × 128 bytes) and header
	chsHeads       = 64
	chsSectors     = 32
)

// readHybridMBR reads the isohybrid MBR boot code (isohdpfx.bin, 432 bytes;
// a whole 512-byte MBR is accepted and its first 432 bytes used).
func readHybridMBR(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("isohybrid MBR: %w", err)
	}
	if len(b) < hybridCodeSize || len(b) > 512 {
		return nil, fmt.Errorf("isohybrid MBR %s: %d bytes, want 432 (isohdpfx.bin)", p, len(b))
	}
	return b[:hybridCodeSize], nil
}

// chs is the cylinder-head-sector address of LBA lba in the 64×32
// geometry, as MBR partition entries hold it (head, sector with the
// cylinder's high bits, cylinder's low byte); past cylinder 1023 it is the
// conventional 1023/254/63 that says "use the LBA".
func chs(lba uint64) (head, sect, cyl byte) {
	c := lba / (chsHeads * chsSectors)
	if c > 1023 {
		return 0xfe, 0xff, 0xff
	}
	h := (lba / chsSectors) % chsHeads
	s := lba%chsSectors + 1
	return byte(h), byte(s) | byte(c>>8)<<6, byte(c)
}

// makeHybrid turns the bootable ISO 9660 image in f, isoSize bytes long,
// into an isohybrid image (see above) with boot code code, and returns the
// new image size. Disk identifiers derive from the primary volume
// descriptor, so equal images get equal identifiers.
func makeHybrid(f *os.File, isoSize int64, code []byte) (int64, error) {
	if len(code) != hybridCodeSize {
		return 0, fmt.Errorf("isohybrid MBR: %d bytes of boot code, want %d", len(code), hybridCodeSize)
	}
	system := make([]byte, 16*sector)
	if _, err := f.ReadAt(system, 0); err != nil {
		return 0, fmt.Errorf("read system area: %w", err)
	}
	for _, b := range system {
		if b != 0 {
			return 0, fmt.Errorf("the ISO's system area is in use")
		}
	}
	biosLBA, _, err := fileExtent(f, IsolinuxBin)
	if err != nil {
		return 0, fmt.Errorf("find %s: %w", IsolinuxBin, err)
	}
	espLBA, espSize, err := fileExtent(f, ESPImagePath)
	if err != nil {
		return 0, fmt.Errorf("find %s: %w", ESPImagePath, err)
	}
	pvd := make([]byte, sector)
	if _, err := f.ReadAt(pvd, 16*sector); err != nil {
		return 0, err
	}
	seed := sha256.Sum256(pvd)

	total := (isoSize + gptTailSectors*512 + hybridAlign - 1) / hybridAlign * hybridAlign
	if err := f.Truncate(total); err != nil {
		return 0, err
	}
	sectors := uint64(total / 512)
	if sectors > 1<<32-1 {
		return 0, fmt.Errorf("image of %d bytes is too large for an MBR", total)
	}
	espStart := uint64(espLBA) * (sector / 512)
	espSectors := (uint64(espSize) + 511) / 512

	// MBR: boot code, isolinux.bin's sector, disk signature, partitions.
	head := make([]byte, 446)
	copy(head, code)
	binary.LittleEndian.PutUint64(head[432:440], uint64(biosLBA)*(sector/512))
	copy(head[440:444], seed[0:4])
	if _, err := f.WriteAt(head, 0); err != nil {
		return 0, err
	}
	part := func(index int, bootable bool, typ mbr.Type, start, n uint64) *mbr.Partition {
		p := &mbr.Partition{Index: index, Bootable: bootable, Type: typ, Start: uint32(start), Size: uint32(n)}
		p.StartHead, p.StartSector, p.StartCylinder = chs(start)
		p.EndHead, p.EndSector, p.EndCylinder = chs(start + n - 1)
		return p
	}
	mbrTable := &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*mbr.Partition{
		part(1, true, mbr.Empty, 0, sectors),
		part(2, false, mbr.EFISystem, espStart, espSectors),
	}}
	if err := mbrTable.Write(f, total); err != nil {
		return 0, fmt.Errorf("write MBR: %w", err)
	}

	gptTable := &gpt.Table{
		LogicalSectorSize:  512,
		PhysicalSectorSize: 512,
		GUID:               guid(seed[:], "disk"),
		Partitions: []*gpt.Partition{{
			Index: 1,
			Start: espStart,
			End:   espStart + espSectors - 1,
			Type:  gpt.EFISystemPartition,
			Name:  "EFI boot image",
			GUID:  guid(seed[:], "esp"),
		}},
	}
	if err := gptTable.Write(f, total); err != nil {
		return 0, fmt.Errorf("write GPT: %w", err)
	}
	if err := setVolumeSpace(f, uint32(total/sector)); err != nil {
		return 0, err
	}
	return total, nil
}

// setVolumeSpace sets the volume space size (in 2048-byte blocks) of the
// primary and supplementary volume descriptors.
func setVolumeSpace(f *os.File, blocks uint32) error {
	vd := make([]byte, sector)
	for s := int64(16); ; s++ {
		if _, err := f.ReadAt(vd, s*sector); err != nil {
			return fmt.Errorf("read volume descriptor %d: %w", s, err)
		}
		if string(vd[1:6]) != "CD001" || vd[0] == 255 {
			return nil
		}
		if vd[0] != 1 && vd[0] != 2 {
			continue
		}
		binary.LittleEndian.PutUint32(vd[80:84], blocks)
		binary.BigEndian.PutUint32(vd[84:88], blocks)
		if _, err := f.WriteAt(vd[80:88], s*sector+80); err != nil {
			return err
		}
	}
}
