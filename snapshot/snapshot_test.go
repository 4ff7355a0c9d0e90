package snapshot

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// pipe is an in-memory snapshot stream.
type pipe struct{ msgs []*roostv1.SnapshotChunk }

func (p *pipe) Send(m *roostv1.SnapshotChunk) error { p.msgs = append(p.msgs, m); return nil }

func (p *pipe) Recv() (*roostv1.SnapshotChunk, error) {
	if len(p.msgs) == 0 {
		return nil, io.EOF
	}
	m := p.msgs[0]
	p.msgs = p.msgs[1:]
	return m, nil
}

func infoOf(data []byte) *roostv1.SnapshotInfo {
	return &roostv1.SnapshotInfo{Index: 7, Sha256: Digest(data), SizeBytes: uint64(len(data))}
}

// A state sent in chunks arrives whole and checked; a stream without info,
// with more bytes than its info says, or with other bytes is refused.
func TestSendReceive(t *testing.T) {
	data := bytes.Repeat([]byte("state"), ChunkSize/2) // 2.5 chunks
	p := &pipe{}
	if err := Send(p, &roostv1.SnapshotChunk{Info: infoOf(data)}, data); err != nil {
		t.Fatal(err)
	}
	if len(p.msgs) != 4 {
		t.Fatalf("%d messages, want info + 3 chunks", len(p.msgs))
	}
	var seen uint64
	first, got, err := Receive(p, func(n, _ uint64) { seen = n })
	if err != nil || !bytes.Equal(got, data) || first.GetInfo().GetIndex() != 7 || seen != uint64(len(data)) {
		t.Fatalf("Receive: %v, %d bytes, progress %d", err, len(got), seen)
	}

	for name, c := range map[string]struct {
		msgs []*roostv1.SnapshotChunk
		want string
	}{
		"empty":      {nil, "does not start with its info"},
		"no info":    {[]*roostv1.SnapshotChunk{{Data: data}}, "does not start with its info"},
		"too long":   {[]*roostv1.SnapshotChunk{{Info: infoOf(data[:10])}, {Data: data[:11]}}, "more than the 10 state bytes"},
		"other data": {[]*roostv1.SnapshotChunk{{Info: infoOf([]byte("aaaa"))}, {Data: []byte("bbbb")}}, "damaged"},
		"short":      {[]*roostv1.SnapshotChunk{{Info: infoOf([]byte("aaaa"))}, {Data: []byte("aa")}}, "damaged"},
	} {
		if _, _, err := Receive(&pipe{msgs: c.msgs}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// A file reads back as written; a damaged file and other files are refused.
func TestFile(t *testing.T) {
	data := []byte("the state")
	var buf bytes.Buffer
	if err := WriteFile(&buf, infoOf(data), data); err != nil {
		t.Fatal(err)
	}
	info, got, err := ReadFile(bytes.NewReader(buf.Bytes()))
	if err != nil || !bytes.Equal(got, data) || info.GetIndex() != 7 {
		t.Fatalf("ReadFile: %v %q %v", info, got, err)
	}
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)-1] ^= 0xff
	if _, _, err := ReadFile(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged file: %v", err)
	}
	if _, _, err := ReadFile(bytes.NewReader(buf.Bytes()[:len(buf.Bytes())-3])); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated file: %v", err)
	}
	for _, other := range []string{"", "apiVersion: roost.io/v1\nkind: Pool\n", "\x00\x01\x02"} {
		if _, _, err := ReadFile(strings.NewReader(other)); err == nil || !strings.Contains(err.Error(), "not a hub snapshot") {
			t.Errorf("ReadFile(%q): %v", other, err)
		}
	}
	if _, _, err := ReadFile(iotestErr{}); !errors.Is(err, errRead) {
		t.Errorf("read error: %v", err)
	}
}

var errRead = errors.New("read failed")

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errRead }

// Whatever the bytes, ReadFile returns an error or a verified state.
func FuzzReadFile(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteFile(&buf, infoOf([]byte("x")), []byte("x"))
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, data, err := ReadFile(bytes.NewReader(b))
		if err == nil && Verify(info, data) != nil {
			t.Fatal("ReadFile returned an unverified state")
		}
	})
}
