package install

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const gi = 1 << 30

func TestChoose(t *testing.T) {
	disks := []*roostv1.DiskInfo{
		{Name: "sdb", SizeBytes: 480 * gi, Serial: "S2", Wwn: "0x5000c500a1b2c3d4"},
		{Name: "sda", SizeBytes: 480 * gi, Serial: "S1"},
		{Name: "sdc", SizeBytes: 4 << 40, Serial: "HDD1", Rotational: true},
		{Name: "sdd", SizeBytes: 32 * gi, Serial: "USB1", Removable: true},
		{Name: "nvme0n1", SizeBytes: 960 * gi, Serial: "NV1", Wwn: "eui.0025388b71b2c3d4"},
		{Name: "sde", SizeBytes: 4 * gi, Serial: "SMALL"},
	}
	for _, tc := range []struct {
		name  string
		disks []*roostv1.DiskInfo
		hints *roostv1.InstallDiskHints
		want  string // disk name, or "error: " + substring
	}{
		{name: "default smallest, tie by name", hints: nil, want: "sda"},
		{name: "default ignores input order", disks: []*roostv1.DiskInfo{disks[0], disks[1]}, want: "sda"},
		{name: "serial", hints: &roostv1.InstallDiskHints{Serial: "NV1"}, want: "nvme0n1"},
		{name: "serial picks a removable disk it names", hints: &roostv1.InstallDiskHints{Serial: "USB1"}, want: "sdd"},
		{name: "WWN without prefix, any case", hints: &roostv1.InstallDiskHints{Wwn: "5000C500A1B2C3D4"}, want: "sdb"},
		{name: "WWN eui prefix", hints: &roostv1.InstallDiskHints{Wwn: "0025388b71b2c3d4"}, want: "nvme0n1"},
		{name: "min size", hints: &roostv1.InstallDiskHints{MinSize: "500Gi"}, want: "nvme0n1"},
		{name: "min size below default", hints: &roostv1.InstallDiskHints{MinSize: "1Gi"}, want: "sde"},
		{name: "max size", hints: &roostv1.InstallDiskHints{MaxSize: "100G"}, want: "error: sda: 480Gi > 93.1Gi maximum"},
		{name: "size range", hints: &roostv1.InstallDiskHints{MinSize: "1Ti", MaxSize: "8Ti"}, want: "sdc"},
		{name: "rotational", hints: &roostv1.InstallDiskHints{Rotational: proto.Bool(true)}, want: "sdc"},
		{name: "solid-state", hints: &roostv1.InstallDiskHints{Rotational: proto.Bool(false), MinSize: "900Gi"}, want: "nvme0n1"},
		{name: "all hints", hints: &roostv1.InstallDiskHints{Serial: "S2", Wwn: "0x5000c500a1b2c3d4", MinSize: "400Gi", MaxSize: "500Gi", Rotational: proto.Bool(false)}, want: "sdb"},
		{name: "serial and size disagree", hints: &roostv1.InstallDiskHints{Serial: "S2", MinSize: "1Ti"}, want: "error: sdb: 480Gi < 1Ti minimum"},
		{
			name:  "every rejection named",
			disks: []*roostv1.DiskInfo{{Name: "sda", SizeBytes: 16 * gi, Removable: true}, {Name: "sdb", SizeBytes: 4 * gi}},
			want:  "error: no install disk matches (size ≥ 8Gi, not removable): sda: removable; sdb: 4Gi < 8Gi minimum",
		},
		{name: "unknown serial", hints: &roostv1.InstallDiskHints{Serial: "NOPE"}, want: `error: sda: serial "S1" is not "NOPE"`},
		{name: "rotational mismatch", hints: &roostv1.InstallDiskHints{Serial: "HDD1", Rotational: proto.Bool(false)}, want: "error: sdc: rotational, want solid-state"},
		{name: "bad quantity", hints: &roostv1.InstallDiskHints{MinSize: "eight"}, want: `error: install disk hints: min_size "eight"`},
		{name: "min above max", hints: &roostv1.InstallDiskHints{MinSize: "2Ti", MaxSize: "1Ti"}, want: "error: install disk hints: min_size 2Ti is larger than max_size 1Ti"},
		{name: "no disks", disks: []*roostv1.DiskInfo{}, want: "error: no install disk: the server reported no disks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.disks
			if in == nil {
				in = disks
			}
			got, err := Choose(in, tc.hints)
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil {
					t.Fatalf("Choose = %s, want an error containing %q", got.GetName(), want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("Choose error:\n  %v\nwant it to contain\n  %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Choose: %v", err)
			}
			if got.GetName() != tc.want {
				t.Fatalf("Choose = %s, want %s", got.GetName(), tc.want)
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0:                    "0 bytes",
		512:                  "512 bytes",
		8 << 30:              "8Gi",
		8<<30 - 1<<20:        "7.9Gi",
		8<<30 + 1:            "8589934593 bytes",
		8<<30 + 5<<20:        "8.004Gi",
		100_000_000_000:      "93.1Gi",
		3<<40 + 1<<39:        "3.5Ti",
		960_197_124_096:      "894.2Gi",
		int64(1) << 62:       "4Ei",
		(int64(1) << 62) + 1: "4611686018427387905 bytes",
	} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
