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
//   - TestWorker: a real Kubernetes worker. etcd, kube-apiserver and
//     kube-controller-manager (make testbin) run on the host; the kubelet
//     reaches the server as a signed system extension; the server enrolls,
//     is assigned to a Pool of that Cluster, and its Node registers through
//     its bootstrap token and turns Ready. A ReplicaSet's pod guarded by a
//     PodDisruptionBudget holds the v1 → v2 drain until the budget is
//     relaxed; the Node comes back Ready and uncordoned on v2. A kubelet
//     extension that cannot start falls back, is Failed and halts the Pool.
//     roostctl server logs shows the enrolling agent's own lines (through
//     the ISO agent's stream), and after the fallback --boot -1 -u kubelet
//     shows the broken kubelet's line from the failed boot's journal on
//     STATE; roostctl server bundle returns a tar.gz with every entry.
//
// TestMainJob and TestWorker run in parallel, after TestRolloutTwoServers:
// each has its own hub and a one-vCPU QEMU server, so on a 2-core machine
// they share it with little slowdown and the tier takes ~10 min less than
// in series; TestRolloutTwoServers (two servers) runs alone.
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
//   - worker_test.go: TestWorker; images_test.go: the container images it
//     imports (testdata/sleeper as pause and workload, no registry).
package e2e
