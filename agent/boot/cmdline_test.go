package boot

import "testing"

func TestBootedRevision(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		want    int64
	}{
		{"", 0},
		{"console=ttyS0 roost.revision=7\n", 7},
		{"roost.revision=7 quiet", 7},
		{"BOOT_IMAGE=/roost/x/vmlinuz\troost.revision=12 ro", 12},
		{"roost.revision=3 roost.revision=4", 4},
		{"roost.revision=3 roost.revision=x", 0},
		{"roost.revision=", 0},
		{"roost.revision", 0},
		{"roost.revision=0", 0},
		{"roost.revision=-1", 0},
		{"roost.revision=+1", 0},
		{"roost.revision=07", 0},
		{`roost.revision="7"`, 0},
		{"roost.revision=7x", 0},
		{"roost.revision=99999999999999999999", 0},
		{"xroost.revision=7", 0},
		{"roost.revisions=7", 0},
	} {
		if got := BootedRevision(tc.cmdline); got != tc.want {
			t.Errorf("BootedRevision(%q) = %d, want %d", tc.cmdline, got, tc.want)
		}
	}
}

func TestReadBootedRevision(t *testing.T) {
	if _, err := ReadBootedRevision(); err != nil {
		t.Skipf("no /proc/cmdline: %v", err)
	}
}
