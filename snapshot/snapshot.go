// Package snapshot moves saved hub states: the chunked stream of
// HubService.SaveSnapshot and RestoreSnapshot, and the file `roostctl hub
// snapshot save` writes (a SnapshotFile message: the SnapshotInfo and the
// state bytes). It checks a state against its info (size and SHA-256);
// what a state holds is the hub's business (hub/state).
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// ChunkSize is the most state bytes one SnapshotChunk carries (1 MiB).
const ChunkSize = 1 << 20

// MaxFileBytes bounds what ReadFile reads: a state of at most 1 GiB (the
// hub's default Restore limit) and its info.
const MaxFileBytes = 1<<30 + 1<<20

// Send sends first (the info, and for a restore dry_run), then data in
// chunks of ChunkSize, on a snapshot stream (without closing it). Errors
// are the stream's.
func Send(to interface {
	Send(*roostv1.SnapshotChunk) error
}, first *roostv1.SnapshotChunk, data []byte) error {
	if err := to.Send(first); err != nil {
		return err
	}
	for off := 0; off < len(data); off += ChunkSize {
		if err := to.Send(&roostv1.SnapshotChunk{Data: data[off:min(off+ChunkSize, len(data))]}); err != nil {
			return err
		}
	}
	return nil
}

// Receive reads a snapshot stream: the first message (the info, and for a
// restore dry_run), then the state, at most info.size_bytes of it;
// progress, if not nil, is called with the bytes received so far and
// info.size_bytes. It checks the state against the info (Verify). Errors:
// the stream's, an empty stream or a first message without info, more
// bytes than the info says, or a failed Verify.
func Receive(from interface {
	Recv() (*roostv1.SnapshotChunk, error)
}, progress func(received, total uint64)) (*roostv1.SnapshotChunk, []byte, error) {
	first, err := from.Recv()
	if errors.Is(err, io.EOF) || (err == nil && first.GetInfo() == nil) {
		return nil, nil, errors.New("the snapshot stream does not start with its info")
	}
	if err != nil {
		return nil, nil, err
	}
	info := first.GetInfo()
	if info.GetSizeBytes() > MaxFileBytes {
		return nil, nil, fmt.Errorf("the snapshot says it holds %d bytes, more than the %d a hub restores", info.GetSizeBytes(), uint64(MaxFileBytes))
	}
	data := make([]byte, 0, info.GetSizeBytes())
	for {
		m, err := from.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if uint64(len(data)+len(m.GetData())) > info.GetSizeBytes() {
			return nil, nil, fmt.Errorf("the snapshot is damaged: more than the %d state bytes its info says", info.GetSizeBytes())
		}
		data = append(data, m.GetData()...)
		if progress != nil {
			progress(uint64(len(data)), info.GetSizeBytes())
		}
	}
	if err := Verify(info, data); err != nil {
		return nil, nil, err
	}
	return first, data, nil
}

// Verify checks that data is the state info describes: its length is
// info.size_bytes and its SHA-256 info.sha256.
func Verify(info *roostv1.SnapshotInfo, data []byte) error {
	digest := sha256.Sum256(data)
	if uint64(len(data)) != info.GetSizeBytes() || hex.EncodeToString(digest[:]) != info.GetSha256() {
		return fmt.Errorf("the snapshot is damaged: its info says %d bytes with SHA-256 %s, the state has %d bytes with SHA-256 %x",
			info.GetSizeBytes(), info.GetSha256(), len(data), digest)
	}
	return nil
}

// Digest returns the hex SHA-256 of data, as SnapshotInfo.sha256 holds it.
func Digest(data []byte) string {
	d := sha256.Sum256(data)
	return hex.EncodeToString(d[:])
}

// WriteFile writes info and data as a SnapshotFile to w.
func WriteFile(w io.Writer, info *roostv1.SnapshotInfo, data []byte) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&roostv1.SnapshotFile{Info: info, State: data})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// snapshotFileTag is the first byte WriteFile writes: field 1 (info) of
// SnapshotFile, length-delimited (protobuf wire format).
const snapshotFileTag = 1<<3 | 2

// ReadFile reads a SnapshotFile from r (at most MaxFileBytes) and checks
// its state against its info (Verify). Errors: r's, a damaged or truncated
// snapshot (it starts as one but does not decode), a file that is not a
// snapshot, or a failed Verify.
func ReadFile(r io.Reader) (*roostv1.SnapshotInfo, []byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, nil, fmt.Errorf("not a hub snapshot: larger than %d bytes", MaxFileBytes)
	}
	f := &roostv1.SnapshotFile{}
	err = proto.Unmarshal(b, f)
	switch {
	case err != nil && len(b) > 0 && b[0] == snapshotFileTag:
		return nil, nil, errors.New("the snapshot is damaged or truncated: it does not decode")
	case err != nil || f.GetInfo() == nil || f.GetInfo().GetSha256() == "":
		return nil, nil, errors.New("not a hub snapshot (written by 'roostctl hub snapshot save')")
	}
	if err := Verify(f.GetInfo(), f.GetState()); err != nil {
		return nil, nil, err
	}
	return f.GetInfo(), f.GetState(), nil
}
