// Package agent is the on-host daemon, roost-agent: enrollment, the stream
// to the hub, inventory, install disk, revision staging, boot counting and
// reboot via systemd, network apply and cleaning.
//
// Rule of the house: the agent never imports the hub (github.com/roostfleet/roost/hub/...)
// or Raft; it talks to the hub only through proto/. imports_test.go checks it.
//
// The agent itself arrives with the agent-enrollment issue.
package agent
