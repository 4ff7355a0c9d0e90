package hub

import (
	"bytes"
	"context"
	"time"

	"github.com/roostfleet/roost/hub/agentconn"
	"github.com/roostfleet/roost/hub/blobs"
)

// Kill stops the member at once, as a crash (kill -9) would, for tests of
// failures: every API connection drops with its calls in flight, and Raft
// stops without handing leadership over or waiting for anything. Writes
// the member was committing may or may not commit on the others. The data
// dir is released, so the member can be started again on it (hub.Start
// with the same addresses). Close must not be called afterwards.
func (h *Hub) Kill() {
	if h.grpc != nil {
		h.grpc.Stop()
	}
	if h.node != nil {
		_ = h.node.Shutdown()
	}
	if h.cancel != nil {
		h.cancel()
		<-h.done
		<-h.liveDone
	}
	if h.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = h.http.Shutdown(ctx)
		cancel()
	}
	if h.media != nil {
		_ = h.media.Close()
	}
	if h.boot != nil {
		_ = h.boot.Close()
	}
	if h.api != nil {
		h.api.Close()
	}
	if h.unlock != nil {
		h.unlock()
	}
}

// MediaURL is the virtual media address of server's image digest, with a
// fresh download token (see mediaURL).
func (h *Hub) MediaURL(server, digest string) (string, error) { return h.mediaURL(server, digest) }

// MediaKey is the download token key of the hub (see mediaKey).
func (h *Hub) MediaKey() []byte { return h.mediaKey() }

// PutBlob stores data in the member's artifact store under its digest.
func (h *Hub) PutBlob(digest string, data []byte) error {
	_, err := h.blobs.Append(digest, int64(len(data)), 0, bytes.NewReader(data))
	return err
}

// Agents returns the member's agent streams (and their data requests).
func (h *Hub) Agents() *agentconn.Registry { return h.agents }

// Blobs is the member's artifact store.
func (h *Hub) Blobs() *blobs.Store { return h.blobs }
