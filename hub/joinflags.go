package hub

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/raftnode"
)

// CheckJoinFlags checks --join (join) and --join-token (token) against the
// data dir dir before anything binds or writes; roost-hub exits 2 when it
// fails. Only a data dir without Raft state uses them (a first start
// bootstraps or joins): there a token without --join, which would
// bootstrap a new, separate hub, and --join without a token are refused,
// and so is a malformed token. On a data dir with Raft state both are
// ignored (a member that joined may keep them on its command line).
func CheckJoinFlags(dir, join, token string) error {
	if dir == "" {
		return nil // Start refuses it
	}
	hasState, err := raftnode.HasState(raftnode.Config{Dir: dataDir(dir).raft()})
	if err != nil || hasState {
		return nil // Start reports an unreadable data dir
	}
	switch {
	case join == "" && token != "":
		return fmt.Errorf("--join-token (or $ROOST_JOIN_TOKEN) is set but --join is not: on the empty data dir %s that would bootstrap a new, separate hub; "+
			"to join the hub the token is for, add --join with the API address of one of its members ('roostctl hub join' prints the whole command line); "+
			"to bootstrap a new hub, leave out --join-token and unset $ROOST_JOIN_TOKEN", dir)
	case join != "" && token == "":
		return fmt.Errorf("--join %s needs --join-token on a first start (the data dir %s holds no Raft state): "+
			"create a token with 'roostctl hub join' and pass it with --join-token (or $ROOST_JOIN_TOKEN)", join, dir)
	case join != "":
		if _, err := api.ParseJoinToken(token); err != nil {
			return fmt.Errorf("--join-token: %w", err)
		}
	}
	return nil
}

// nodeIDPattern is what --node-id accepts: the ID becomes the common name
// of the member's certificate and its Raft ID.
var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CheckNodeID checks --node-id (id): empty (a random ID) or 1 to 63
// characters of letters, digits, '.', '_' and '-', starting with a letter
// or a digit. roost-hub exits 2 when it fails.
func CheckNodeID(id string) error {
	if id == "" || nodeIDPattern.MatchString(id) {
		return nil
	}
	return fmt.Errorf("--node-id %q: must be 1 to 63 characters of letters, digits, '.', '_' and '-', starting with a letter or a digit (e.g. hub-a)", id)
}

// readNodeID returns the member's ID without writing anything: the one in
// DIR/node-id (want, if given, must match it), else want, else a random
// "hub-xxxxxxxx". start records it (dataDir.nodeID) only once the member
// has its certificate, so a first start that fails leaves no node-id
// behind and a corrected start may pick another --node-id.
func (d dataDir) readNodeID(want string) (string, error) {
	b, err := os.ReadFile(d.path("node-id"))
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if want != "" && want != id {
			return "", fmt.Errorf("%s says this member is %q, not %q; a member's ID cannot change: leave out --node-id or give --node-id %s",
				d.path("node-id"), id, want, id)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	case want != "":
		return want, nil
	}
	r := make([]byte, 4)
	if _, err := rand.Read(r); err != nil {
		return "", err
	}
	return "hub-" + hex.EncodeToString(r), nil
}

// CheckLogStore checks --raft-log-store (kind) against the Raft log the
// data dir dir holds, before anything binds or writes; roost-hub exits 2
// when it fails (raftnode.CheckLogStore).
func CheckLogStore(dir, kind string) error {
	return raftnode.CheckLogStore(kind, dataDir(dir).raft())
}
