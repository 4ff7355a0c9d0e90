// Package cleaning is the leader-only controller that retries failed
// cleanings: a Server whose agent could not wipe it (CleaningFailed, see
// hub/state cleaning.go) is cleaned again after an exponential backoff
// (RetryBackoff: 1 min after the first failure, doubling, at most 1 h),
// through the ModifyServer action SERVER_ACTION_CLEAN, the command that
// `roostctl server clean` proposes by hand. It is a hub/controller loop
// keyed by Server name, fed by Server events; time drives the wait
// (RequeueAfter).
package cleaning
