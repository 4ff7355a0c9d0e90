// Package e2e holds the end-to-end tests of test tier 3: a real hub on the
// host's loopback, the testbed release pushed with roostctl, an enrollment
// ISO built with roost-image, and UEFI QEMU servers (software emulation)
// with empty disks. Everything is driven through roostctl.
//
//   - TestMainJob: one server enrolls, is assigned to a Pool, installs its
//     disk, reboots into its Revision, survives a power cycle, takes a new
//     Revision on a label change, and falls back from a Revision that
//     never boots.
//   - TestRolloutTwoServers: two servers of one Pool (maxUnavailable 1)
//     install release v1; release v2 is pushed while the Pool's
//     maintenance window is closed (pre-staged, no reboot), then the
//     window opens and they move to v2 one at a time.
//
// Run: make build testbed && ROOST_E2E=1 go test -v -timeout 90m ./test/e2e/
// (make e2e does both; images/deps.sh --e2e installs QEMU, OVMF and the
// OpenSSH client). Without ROOST_E2E=1 the test skips.
//
// Files:
//   - vm_test.go: the QEMU server (OVMF with its own variable store, a
//     sparse virtio disk, the ISO as a lower-priority CD-ROM, a management
//     NIC with SSH forwarded to loopback, optionally four isolated NICs
//     for bonds, a serial console appended to a file across power cycles).
//   - roost_test.go: the hub process and roostctl -o json helpers.
//   - job_test.go: what the tests share (the testbed, the hub with the
//     release pushed, the enrollment ISO, waits that print diagnostics).
//   - main_test.go: TestMainJob; testdata/fleet.yaml: its NetworkProfile
//     and Pool.
//   - rollout_test.go: TestRolloutTwoServers.
package e2e
