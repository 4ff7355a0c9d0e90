// Package agentconn keeps the agent streams one hub member serves
// (AgentService.Connect): a Registry of the open streams by Server name,
// the desired state it pushes on them (DesiredState; pushed on every
// Revision or Machine change and checked again at every heartbeat), the
// GoAway a member sends them when it shuts down, and the diff of what an
// agent reports against its Server's recorded status (HelloUpdate,
// Registry.StatusUpdate), so that only changes are proposed, and the data
// requests (a Server's journal, its support bundle) answered on the
// streams (data.go: OpenData, Deliver). hub/api
// validates the agent's messages and forwards them here; this package
// proposes nothing itself.
package agentconn
