// Package agent is the on-host daemon, roost-agent: enrollment, machine
// identity, inventory and the live stream to the hub. (Install disk,
// revision staging, boot counting, reboot via systemd, network apply and
// cleaning arrive with later issues.)
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
// Failures move it to another member after a full-jitter exponential delay.
// The certificate is renewed at two thirds of its lifetime for the same key.
//
// OS access sits behind small interfaces with fakes: IdentitySource
// (SysfsIdentity, FakeIdentity), InventorySource (HostInventory with
// jaypipes/ghw, FakeInventory), Store (FileStore, the state dir; MemStore)
// and Clock (RealClock, FakeClock). The simulator (package sim, `roost-agent
// simulate`) runs many Agents in one process with the fakes. Package config
// is /etc/roost/agent.yaml. docs/agent.md describes it all.
//
// Rule of the house: the agent never imports the hub (github.com/roostfleet/roost/hub/...),
// Raft or the CLI (cli/printers); it talks to the hub only through proto/
// and internal/tlsconfig. test/imports_test.go checks it.
package agent
