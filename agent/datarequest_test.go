package agent_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/internal/fakehub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// blockingJournal writes "0123456789" per line until canceled, counting
// the journal reads that ended.
type blockingJournal struct{ ended atomic.Int32 }

func (j *blockingJournal) Read(ctx context.Context, q agent.JournalQuery, w io.Writer) error {
	defer j.ended.Add(1)
	for ctx.Err() == nil {
		if _, err := io.WriteString(w, "0123456789"); err != nil {
			return err
		}
	}
	return nil
}

// TestDataRequestFlowControl: the agent acknowledges a request at once,
// sends no more chunks (of at most chunk_bytes) than its window and the
// credit the hub granted, refuses requests beyond MaxDataRequests, and a
// cancel stops the journal reader.
func TestDataRequestFlowControl(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	id, inv := simServer(3)
	j := &blockingJournal{}
	startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: &agent.MemStore{}, Identity: id, Inventory: inv, Journal: j})
	fakehub.Eventually(t, "the stream", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) > 0 })
	chunks := func(id string) (n int, data string, done []*roostv1.DataChunk) {
		hub.Mu.Lock()
		defer hub.Mu.Unlock()
		for _, c := range hub.DataChunks {
			if c.GetRequestId() != id {
				continue
			}
			if c.GetDone() {
				done = append(done, c)
				continue
			}
			n++
			data += string(c.GetData())
		}
		return n, data, done
	}
	hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_ReadJournal{ReadJournal: &roostv1.ReadJournal{RequestId: "r1", ChunkBytes: 4, Window: 2}}})
	// the acknowledgement and 2 chunks of 4 bytes, then nothing without credit
	fakehub.Eventually(t, "ack and window", func() bool { n, _, _ := chunks("r1"); return n == 3 })
	for range 20 { // give a misbehaving agent the chance to send more
		hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_DataCredit{DataCredit: &roostv1.DataCredit{RequestId: "other", Chunks: 1}}})
	}
	if n, data, _ := chunks("r1"); n != 3 || data != "01234567" {
		t.Fatalf("before credit: %d chunks %q, want the ack and 2 chunks", n, data)
	}
	hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_DataCredit{DataCredit: &roostv1.DataCredit{RequestId: "r1", Chunks: 3}}})
	fakehub.Eventually(t, "3 more chunks", func() bool { n, _, _ := chunks("r1"); return n == 6 })
	// writes of 10 bytes, cut at 4: 4 4 2 4 4
	if _, data, _ := chunks("r1"); data != "012345678901234567" {
		t.Errorf("data %q", data)
	}

	// MaxDataRequests at once; one more is refused
	for i := 2; i <= agent.MaxDataRequests+1; i++ {
		hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_ReadJournal{ReadJournal: &roostv1.ReadJournal{RequestId: fmt.Sprintf("r%d", i), Window: 1}}})
	}
	last := fmt.Sprintf("r%d", agent.MaxDataRequests+1)
	fakehub.Eventually(t, "the refusal", func() bool { _, _, done := chunks(last); return len(done) == 1 })
	if _, _, done := chunks(last); !strings.Contains(done[0].GetError(), "serves 4 log or bundle requests already") {
		t.Errorf("refusal: %v", done[0])
	}

	// a cancel stops the reader
	for i := 1; i <= agent.MaxDataRequests; i++ {
		hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_DataCredit{DataCredit: &roostv1.DataCredit{RequestId: fmt.Sprintf("r%d", i), Cancel: true}}})
	}
	fakehub.Eventually(t, "the journal readers end", func() bool { return j.ended.Load() == int32(agent.MaxDataRequests) })
	if _, _, done := chunks("r1"); len(done) != 0 {
		t.Errorf("a canceled request was answered: %v", done)
	}
}
