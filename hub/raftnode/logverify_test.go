package raftnode

import (
	"testing"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A checkpoint entry must not decode as a command: every roost-hub, also
// one from before checkpoints, then applies it as a malformed command,
// which changes nothing but the applied index.
func TestCheckpointIsNotACommand(t *testing.T) {
	if err := proto.Unmarshal(checkpointData, &roostv1.Command{}); err == nil {
		t.Fatal("the checkpoint entry decodes as a roostv1.Command")
	}
}
