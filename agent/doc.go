// Package agent is the on-host daemon, roost-agent: enrollment, machine
// identity, inventory and the live stream to the hub and, on a managed
// host, the Revisions it boots.
//
// Agent.Run enrolls once with an enrollment token (Enroll: identity,
// inventory and a CSR for the agent's ECDSA P-256 key, generated on first
// start and never regenerated), then keeps an AgentService.Connect stream
// to one hub member, authenticated by its client certificate alone: Hello
// (resuming from the last applied generation), status on change,
// heartbeats at the hub's interval; DesiredState generations are recorded.
// With a Host (--manage-host) the agent also writes a worker kubelet's
// bootstrap kubeconfig (/etc/kubernetes/bootstrap-kubelet.conf) while the
// hub hands it a bootstrap token in its desired state, and removes it once
// the hub stops (kubelet.go).
// The stream is a session (session.go) with one method per event: a hub
// message, a heartbeat, inventory or renewal tick, a rebalance probe, a
// host status change, a chunk of a log or bundle request. The hub's log
// and bundle requests (roostctl server logs, server bundle) run in
// goroutines of their own, back-pressured by the hub's credit
// (datarequest.go): the journal through Journal (journal.go, journalctl),
// the support bundle through Commands (bundle.go); at start an installed
// Server's journals of old boots are bounded (journalprune.go). Failures move it to another member after a
// full-jitter exponential delay. The certificate is renewed at two thirds
// of its lifetime for the same key.
//
// With a Host, the host loop (hostloop.go) first assesses the boot
// (assess.go: network profile applied and verified (network.go), required
// units active, health URLs answering; then the boot entry is marked good,
// or the Server reboots so the boot loader counts the try and falls back).
// For each desired Revision it then prepares the install disk and installs
// systemd-boot (installdisk.go, package install), copies the agent's
// identity to STATE (identitycopy.go), fetches the kernel, initrd and
// extensions after checking their signed manifests (fetchverified.go,
// package fetch), stages a boot-counted entry (package boot), records the
// Revision (revisionrecord.go), asks the hub for a reboot Lease and
// reboots. Conditions go to the hub through the stream (hoststate.go).
// When the hub asks for a cleaning (DesiredState.cleaning), the host loop
// wipes the Server in place from RAM instead (clean.go: identity kept in
// memory, workloads stopped, STATE shut down and detached, disks wiped by
// install.Wipe) and the stream sends the CleaningResult.
//
// OS access sits behind small interfaces with fakes: IdentitySource
// (SysfsIdentity, FakeIdentity), InventorySource (HostInventory with
// jaypipes/ghw, FakeInventory), Store (FileStore, the state dir; MemStore)
// Clock (RealClock, FakeClock), Journal (Journalctl) and Commands
// (ExecCommands). The simulator (package sim, `roost-agent
// simulate`) runs many Agents in one process with the fakes. Package config
// is /etc/roost/agent.yaml. docs/agent.md describes it all.
//
// Rule of the house: the agent never imports the hub (github.com/roostfleet/roost/hub/...),
// Raft or the CLI (cli/printers); it talks to the hub only through proto/
// and internal/tlsconfig. test/imports_test.go checks it.
package agent
