package iso

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/partition/gpt"
)

// TestISOHybridLayout checks the isohybrid MBR and GPT of a built ISO: the
// boot code and the sector of isolinux.bin for BIOS, and the partitions
// over the El Torito EFI image for UEFI (MBR and GPT, primary and backup).
func TestISOHybridLayout(t *testing.T) {
	spec := fixture(t)
	out := filepath.Join(t.TempDir(), "x.iso")
	if err := Build(spec, out); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := os.ReadFile(spec.Loaders.IsohybridMBR)
	size := int64(len(img))
	if size%hybridAlign != 0 {
		t.Errorf("image size %d is not whole MiB", size)
	}
	if got := int64(binary.LittleEndian.Uint32(img[16*sector+80:])) * sector; got != size {
		t.Errorf("volume space %d bytes, image %d", got, size)
	}
	if got := int64(binary.BigEndian.Uint32(img[16*sector+84:])) * sector; got != size {
		t.Errorf("volume space (big-endian) %d bytes, image %d", got, size)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	biosLBA, _, err := fileExtent(f, IsolinuxBin)
	if err != nil {
		t.Fatal(err)
	}
	espLBA, espSize, err := fileExtent(f, ESPImagePath)
	if err != nil {
		t.Fatal(err)
	}

	// MBR
	if !bytes.Equal(img[:432], code) {
		t.Error("MBR boot code is not isohdpfx.bin")
	}
	if got := binary.LittleEndian.Uint64(img[432:440]); got != uint64(biosLBA)*4 {
		t.Errorf("MBR names sector %d for isolinux.bin, want %d", got, biosLBA*4)
	}
	if bytes.Equal(img[440:444], []byte{0, 0, 0, 0}) {
		t.Error("no disk signature")
	}
	if img[510] != 0x55 || img[511] != 0xaa {
		t.Error("no MBR signature")
	}
	type entry struct {
		boot, typ  byte
		start, n   uint32
		chsS, chsE [3]byte
	}
	var parts [4]entry
	for i := range parts {
		e := img[446+16*i:]
		parts[i] = entry{boot: e[0], typ: e[4], start: binary.LittleEndian.Uint32(e[8:]), n: binary.LittleEndian.Uint32(e[12:])}
		copy(parts[i].chsS[:], e[1:4])
		copy(parts[i].chsE[:], e[5:8])
	}
	sectors := uint32(size / 512)
	if p := parts[0]; p.boot != 0x80 || p.typ != 0 || p.start != 0 || p.n != sectors {
		t.Errorf("MBR partition 1 = %+v, want active, type 0, sectors 0..%d", p, sectors)
	}
	// 64 heads × 32 sectors: the last sector is head 63, sector 32 of the
	// last cylinder.
	lastCyl := sectors/(64*32) - 1
	if want := [3]byte{63, 32 | byte(lastCyl>>8)<<6, byte(lastCyl)}; parts[0].chsE != want || parts[0].chsS != [3]byte{0, 1, 0} {
		t.Errorf("MBR partition 1 CHS %v..%v, want [0 1 0]..%v", parts[0].chsS, parts[0].chsE, want)
	}
	espSectors := (espSize + 511) / 512
	if p := parts[1]; p.boot != 0 || p.typ != 0xef || p.start != espLBA*4 || p.n != espSectors {
		t.Errorf("MBR partition 2 = %+v, want type 0xEF at %d, %d sectors", p, espLBA*4, espSectors)
	}
	for i, p := range parts {
		if p.typ == 0xee {
			t.Errorf("MBR partition %d is protective (0xEE): MBR firmware would ignore the 0xEF partition", i+1)
		}
	}
	if parts[2] != (entry{}) || parts[3] != (entry{}) {
		t.Errorf("MBR partitions 3, 4 = %+v, %+v: want empty", parts[2], parts[3])
	}

	// GPT, read by go-diskfs (which checks the CRCs)
	table, err := gpt.Read(f, 512, 512)
	if err != nil {
		t.Fatalf("GPT: %v", err)
	}
	if table.RecoveredFromBackup {
		t.Error("primary GPT invalid")
	}
	if table.ProtectiveMBR {
		t.Error("GPT reader sees a protective MBR")
	}
	if len(table.Partitions) != 1 {
		t.Fatalf("GPT partitions = %+v, want the ESP", table.Partitions)
	}
	p := table.Partitions[0]
	if !strings.EqualFold(string(p.Type), string(gpt.EFISystemPartition)) || p.Start != uint64(espLBA)*4 || p.End != uint64(espLBA)*4+uint64(espSectors)-1 {
		t.Errorf("GPT partition = type %s sectors %d..%d, want the ESP type at %d..%d", p.Type, p.Start, p.End, espLBA*4, espLBA*4+espSectors-1)
	}
	// The backup header is in the last sector and points back at LBA 1.
	last := img[size-512:]
	if string(last[:8]) != "EFI PART" {
		t.Fatal("no backup GPT header in the last sector")
	}
	if cur, alt := binary.LittleEndian.Uint64(last[24:]), binary.LittleEndian.Uint64(last[32:]); cur != uint64(sectors-1) || alt != 1 {
		t.Errorf("backup GPT header: current %d, alternate %d; want %d, 1", cur, alt, sectors-1)
	}
	hdr := append([]byte(nil), last[:92]...)
	want := binary.LittleEndian.Uint32(hdr[16:])
	binary.LittleEndian.PutUint32(hdr[16:], 0)
	if crc32.ChecksumIEEE(hdr) != want {
		t.Error("backup GPT header CRC wrong")
	}
	if lastUsable := binary.LittleEndian.Uint64(img[512+48:]); p.End > lastUsable {
		t.Errorf("ESP ends at %d, after the last usable sector %d", p.End, lastUsable)
	}
}

func TestHybridMBRSize(t *testing.T) {
	spec := fixture(t)
	p := filepath.Join(t.TempDir(), "mbr.bin")
	if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	spec.Loaders.IsohybridMBR = p
	dir := t.TempDir()
	err := Build(spec, filepath.Join(dir, "x.iso"))
	if err == nil || !strings.Contains(err.Error(), "want 432 (isohdpfx.bin)") {
		t.Fatalf("err = %v", err)
	}
	noLeftovers(t, dir)
}

func TestCHS(t *testing.T) {
	for _, tc := range []struct {
		lba     uint64
		h, s, c byte
	}{
		{0, 0, 1, 0},
		{31, 0, 32, 0},
		{32, 1, 1, 0},
		{2047, 63, 32, 0},
		{2048, 0, 1, 1},
		{256 * 2048, 0, 1 | 1<<6, 0},
		{1024*2048 - 1, 63, 32 | 3<<6, 255},
		{1024 * 2048, 0xfe, 0xff, 0xff},
	} {
		h, s, c := chs(tc.lba)
		if h != tc.h || s != tc.s || c != tc.c {
			t.Errorf("chs(%d) = %d/%d/%d, want %d/%d/%d", tc.lba, h, s, c, tc.h, tc.s, tc.c)
		}
	}
}

func TestMissingHybridMBRNamesPackage(t *testing.T) {
	saved := hybridPaths
	hybridPaths.paths = []string{"/nonexistent/isohdpfx.bin"}
	defer func() { hybridPaths = saved }()
	spec := fixture(t)
	spec.Loaders.IsohybridMBR = ""
	dir := t.TempDir()
	err := Build(spec, filepath.Join(dir, "x.iso"))
	if err == nil || !strings.Contains(err.Error(), "apt-get install isolinux") || !strings.Contains(err.Error(), "--isohybrid-mbr") {
		t.Fatalf("err = %v", err)
	}
	noLeftovers(t, dir)
	// Raw images need no BIOS loaders.
	spec.Format = FormatRaw
	if err := Build(spec, filepath.Join(dir, "x.img")); err != nil {
		t.Fatalf("raw image: %v", err)
	}
}
