package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netbootUUID and netbootMAC are the network-booted server's SMBIOS UUID
// (its Server name) and management MAC.
const (
	netbootUUID = "6f0e3c2a-52d1-4b7e-9a51-00000000e2e5"
	netbootMAC  = "52:54:00:e2:00:05"
)

// TestNetboot is acceptance 2 of issue 21: a server with an empty disk
// and no CD boots from the network and enrolls. 'roostctl netboot url'
// makes a network boot URL for the testbed release; QEMU's DHCP server
// hands it out as the boot file; the NIC's iPXE ROM fetches the hub's
// iPXE script over HTTP (roost-hub --boot-addr, reached at 10.0.2.2), then
// the release kernel and initrd and the config initrd with the enrollment
// token, the hub CA, the hub address and the trusted release key, and the
// roost-agent extension the testbed OS lacks; the agent enrolls. One boot, no install. The
// firmware is OVMF (the iPXE ROM's EFI side: UEFI, the firmware Roost
// installs on), or SeaBIOS with ROOST_E2E_NETBOOT_FIRMWARE=seabios (its
// PXE side; both pass, see docs/zero-touch.md). It also checks that
// the hub logged the boot without the URL's secret part.
func TestNetboot(t *testing.T) {
	tb := needTestbed(t)
	j := newJob(t, tb, 20*time.Minute)
	var m struct {
		Version string `json:"version"`
	}
	data, err := os.ReadFile(filepath.Join(tb.Bundle, "release.json"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil || m.Version == "" {
		t.Fatalf("testbed release.json: version %q, %v", m.Version, err)
	}
	// the config initrd carries the hub's trusted release keys, as
	// roost-image enroll --release-key bakes them into an ISO
	j.hub.MustCtl(t, j.ctx, "image", "trust", "add", tb.ReleaseKey)
	var nb struct {
		URL       string `json:"url"`
		TokenName string `json:"tokenName"`
	}
	out := j.hub.MustCtl(t, j.ctx, "netboot", "url", "--version", m.Version, "--token-ttl", "1h", "-o", "json")
	if err := json.Unmarshal([]byte(out), &nb); err != nil || !strings.HasPrefix(nb.URL, "http://10.0.2.2:") {
		t.Fatalf("roostctl netboot url: %v\n%s", err, out)
	}
	// QEMU's DHCP server puts the boot file in the 128-byte BOOTP file field
	if len(nb.URL) >= 128 {
		t.Fatalf("boot URL %s is %d bytes: too long for the BOOTP file field", nb.URL, len(nb.URL))
	}
	t.Logf("boot URL (%d bytes) for token %s", len(nb.URL), nb.TokenName)

	seabios := os.Getenv("ROOST_E2E_NETBOOT_FIRMWARE") == "seabios"
	vm := j.newVM(VMConfig{Dir: filepath.Join(t.TempDir(), "vm"), UUID: netbootUUID, MgmtMAC: netbootMAC, SSHPort: freePort(t),
		Netboot: nb.URL, SeaBIOS: seabios})
	started := time.Now()
	vm.Start()
	j.poll("the iPXE script fetched from the hub", 5*time.Minute, func() (bool, string) {
		log, _ := os.ReadFile(j.hub.Log)
		return strings.Contains(string(log), "network boot script served"), "not yet (console: " + tail(vm.ConsoleSince(0), 300) + ")"
	})
	j.logTiming("power on to iPXE script", time.Since(started))
	j.waitEnrolled(15*time.Minute, netbootUUID)
	j.logTiming("power on to enrolled by network boot", time.Since(started))

	log, err := os.ReadFile(j.hub.Log)
	if err != nil {
		t.Fatal(err)
	}
	grant := strings.TrimSuffix(nb.URL[strings.Index(nb.URL, "/boot/")+len("/boot/"):], "/ipxe")
	if mac := grant[strings.LastIndexByte(grant, '.')+1:]; strings.Contains(string(log), mac) {
		t.Errorf("the hub log holds the boot URL's MAC")
	}
	if strings.Contains(string(log), "refused") && strings.Contains(string(log), "network boot request") {
		t.Logf("note: the hub refused some network boot requests:\n%s", grepLines(string(log), "network boot request refused"))
	}
}

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
