package state

import (
	"fmt"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// RulesVersion is the newest version of the apply rules this build
// implements: what Apply checks and how it changes the state for each
// command. Every Raft command records the version it is applied with
// (Command.rules_version), so members of two roost-hub versions, and a
// member replaying an old log, store the same result for it. The leader
// proposes with the lowest version any member implements (EffectiveRules);
// a rule that changes what a command does is added under a new version and
// checked against the command's version in the applier, keeping the old
// behaviour for commands of older versions. Versions:
//
//	1: the rules of the first release (also commands with no version)
//	2: denying or decommissioning a Server clears its pool (spec.pool) and
//	   reachability, and no liveness change is recorded for a
//	   Decommissioned Server (its agent is refused); a Decommissioned Server
//	   that enrolls again takes the pool of its new token, and the token's
//	   labels replace those of the same keys (rulesDecommission); a join
//	   token with revoked_at set is refused (RulesJoinTokenRevocation)
//	3: the RevokeJoinTokens command sets revoked_at inside Apply, so a use
//	   applied just before a revocation keeps its count
//	   (RulesJoinTokenRevokeCommand); under older rules the command is
//	   unknown, as it is to the members implementing them; a Pool is not
//	   deleted while an EnrollmentToken that can still enroll, or a Server
//	   that is not Decommissioned, pre-assigns servers to it (spec.pool;
//	   rulesPoolReferences); the ReregisterServer command records a Server
//	   the state lost again for its agent (RulesReregister)
//	4: ApplyObjects may carry Extensions, checked and kept immutable by
//	   the FSM (signed by a trusted key once one is trusted); a
//	   MachineClass's spec.extensions must resolve to Extensions that can
//	   be merged on its Machines' Servers, checked when the class, a Pool
//	   using it or a new version it follows is applied; an Extension a
//	   class resolves to is not deleted (RulesExtensions). Under older
//	   rules the kind is unknown, as it is to the members implementing
//	   them; a status update that changes a Server's booted Revision
//	   without conditions drops the agent's Healthy condition, which was
//	   about the previous boot, so a Revision is Good only once its own
//	   boot assessment passed (RulesBootHealth)
//	5: the last roost-agent Extension is not deleted while a MachineClass
//	   exists: every Revision runs it (RulesAgentExtension)
//	6: a command carrying a request ID (Command.request_id) that an
//	   earlier command applied changes nothing and returns that command's
//	   result; successful commands with a request ID are recorded, and
//	   records expire by command time and index (RulesRequestIDs,
//	   requests.go). Under older rules the ID is ignored, as the members
//	   implementing them ignore it
//	7: an ImageRelease put over a stored one (ApplyObjects, as
//	   PutImageRelease sends it) must be the same release: everything of
//	   its spec but the channels equal (FailedPrecondition otherwise), and
//	   it keeps the stored channels, which only PromoteImageRelease changes
//	   (RulesImageReleases, images.go). Under older rules the leader's API
//	   checked the release before proposing and the put's channels replaced
//	   the stored ones
//	8: pausing the rollout of a Pool that is paused changes nothing
//	   (RulesPauseKeepsReason). Under older rules it wrote the operator's
//	   reason over the one the rollout controller had refined
//	9: members know the PutUserCertificate and RevokeUser commands: users
//	   with roles and the revocation of all their certificates (RulesUsers,
//	   users.go). Under older rules they are unknown, as they are to the
//	   members implementing them
//	10: members keep the operations log (the Event kind, events.go): the
//	   FSM records Events for what a command did (a Server enrolled, a
//	   token used, a Machine created or released, a Revision rendered,
//	   booted Good or Failed, a Lease granted or released, a Server
//	   unreachable or reachable again, a rollout
//	   paused, resumed or halted) and applies the RecordEvents command of
//	   the controllers, bounded by MaxEvents, MaxEventsPerObject and
//	   EventTTL (RulesEvents). Under older rules nothing is recorded and
//	   RecordEvents is unknown, as it is to the members implementing them
//	11: a released Server (its Machine unassigned, scaled down or deleted)
//	   is Cleaning, not Available: its agent wipes its disks by the
//	   MachineClass's spec.cleaning and reports the result (UpdateServerStatus
//	   cleaning_result), after which it is Available, or CleaningFailed with
//	   the reason; decommissioning an unclaimed Server cleans it first; the
//	   ModifyServer action SERVER_ACTION_CLEAN starts a new cleaning
//	   (RulesCleaning, cleaning.go). Under older rules a release returns the
//	   Server to Available at once, a decommission is immediate, and the
//	   action and the result are unknown
//	12: SetConditions also takes a Pool's Frozen and Remediating
//	   conditions (the safety and remediation controllers) and a Machine's
//	   Remediating condition, set and cleared (RulesRemediation,
//	   conditions.go). Under older rules they are refused, as the members
//	   implementing them refuse them
//	13: members know the RegisterServer and UpdateServerBMC commands and
//	   the power, boot-once and provision Server actions: Servers with a
//	   BMC, registered before they enroll and matched at enrollment by MAC
//	   or the BMC's system UUID (RulesBMC, bmc.go); decommissioning a
//	   Server with a BMC also records a power-off; a claim of a Server
//	   whose firmware is legacy BIOS is refused (machines.go claimBlock). Under older rules they
//	   are unknown, as they are to the members implementing them
//	14: members know the ReleaseFeed and Channel kinds and the
//	   UpdateReleaseFeedStatus, ImportImageRelease, PromoteAfterSoak and
//	   UpdateChannelStatus commands (RulesReleaseFeeds, releasefeeds.go,
//	   channels.go); an ImageRelease records when it joined each channel
//	   (status.channels). Under older rules the kinds and commands are
//	   unknown, as they are to the members implementing them
const RulesVersion uint32 = 14

// Versions that introduced a rule, for the applier's checks.
const (
	// rulesDecommission: decommissioned Servers keep no pool or
	// reachability.
	rulesDecommission uint32 = 2
	// RulesJoinTokenRevocation: members refuse a join token whose
	// revoked_at is set. While an older member may apply the log, a
	// revocation also ends the token's expires_at.
	RulesJoinTokenRevocation uint32 = 2
	// RulesJoinTokenRevokeCommand: members know the RevokeJoinTokens
	// command. Before, the leader revoked a token by putting the whole
	// record back with revoked_at set (PutJoinToken), which could undo a
	// use applied between its read and its write.
	RulesJoinTokenRevokeCommand uint32 = 3
	// rulesPoolReferences: deleting a Pool is refused while an
	// EnrollmentToken that is not revoked, expired (at the command's time)
	// or used up names it in spec.pool, or while a Server that is not
	// Decommissioned and that no Machine claims does (see
	// applier.poolPreAssigners). Before, the Pool went and such Servers
	// stayed pre-assigned to a Pool that no longer existed, so no Pool
	// could claim them.
	rulesPoolReferences uint32 = 3
	// RulesReregister: members know the ReregisterServer command, with
	// which an agent whose Server the state lost (a restore of an older
	// snapshot, a delete) records it again, PendingApproval.
	RulesReregister uint32 = 3
	// RulesExtensions: members know the Extension kind and check
	// Extensions and MachineClass spec.extensions (extensions.go).
	RulesExtensions uint32 = 4
	// RulesBootHealth: a new booted Revision drops the stale Healthy
	// condition (updateServerStatus).
	RulesBootHealth uint32 = 4
	// RulesAgentExtension: the last agent extension is kept
	// (checkLastAgentDelete).
	RulesAgentExtension uint32 = 5
	// RulesRequestIDs: members deduplicate commands by request ID
	// (requests.go), so a retried create returns the first result.
	RulesRequestIDs uint32 = 6
	// RulesImageReleases: the FSM keeps an ImageRelease immutable and
	// keeps its channels when it is put again (putImageReleaseOver).
	// Before, a push that copied the channels it had read could undo a
	// promotion applied between its read and its write.
	RulesImageReleases uint32 = 7
	// RulesPauseKeepsReason: a pause of a paused Pool is unchanged
	// (applyControlRollout), so 'roostctl rollout pause' says it was
	// already paused once the controller has refined the reason.
	RulesPauseKeepsReason uint32 = 8
	// RulesUsers: members know the user commands (users.go), and check
	// every caller's certificate against the revoked users.
	RulesUsers uint32 = 9
	// RulesEvents: members record Events (events.go) and know the
	// RecordEvents command.
	RulesEvents uint32 = 10
	// RulesCleaning: released and decommissioned Servers are cleaned by
	// their agent before they are Available (or Decommissioned)
	// (cleaning.go).
	RulesCleaning uint32 = 11
	// RulesRemediation: SetConditions takes the Pool conditions Frozen
	// and Remediating and the Machine condition Remediating.
	RulesRemediation uint32 = 12
	// RulesBMC: members know Servers' BMCs (bmc.go): RegisterServer,
	// UpdateServerBMC, the BMC Server actions, the match of an enrolling
	// Server to its Registered record, and the power-off at decommission.
	RulesBMC uint32 = 13
	// RulesReleaseFeeds: members know ReleaseFeeds, Channels, their
	// commands, and record ImageRelease status.channels.
	RulesReleaseFeeds uint32 = 14
)

// commandRules is the apply rules version of cmd; 0 (commands written
// before versions were recorded) means 1.
func commandRules(cmd *roostv1.Command) uint32 {
	return max(cmd.GetRulesVersion(), 1)
}

// memberRules is the apply rules version m implements; 0 (a member that has
// not reported it) means 1.
func memberRules(m *roostv1.HubMember) uint32 {
	return max(m.GetRulesVersion(), 1)
}

// EffectiveRules returns the apply rules version to propose commands with:
// the lowest version the recorded members implement (a member that has not
// reported its version counts as 1), never above this build's RulesVersion.
func EffectiveRules(members []*roostv1.HubMember) uint32 {
	return lowestRules(members, RulesVersion)
}

// lowestRules is EffectiveRules for a build implementing up to implemented.
func lowestRules(members []*roostv1.HubMember, implemented uint32) uint32 {
	v := implemented
	for _, m := range members {
		v = min(v, memberRules(m))
	}
	return v
}

// RulesTooNewError is what Apply hands to Options.Halt when a log entry
// needs apply rules this build does not implement: the member's roost-hub
// is older than the entry (a downgrade, or a member that missed an upgrade)
// and applying it with older rules could store a different result than the
// other members did.
type RulesTooNewError struct {
	// Index is the Raft log index of the entry.
	Index uint64
	// Needed is the entry's rules version; Implemented is RulesVersion.
	Needed, Implemented uint32
}

func (e *RulesTooNewError) Error() string {
	return fmt.Sprintf("the Raft log entry at index %d needs apply rules version %d, and this roost-hub implements up to %d: "+
		"run a newer roost-hub on this member (the other members already do; downgrading a member is not supported)", e.Index, e.Needed, e.Implemented)
}
