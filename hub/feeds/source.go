package feeds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/imagebuilder/feed"
	"github.com/roostfleet/roost/resource"
)

// ErrNotFound is returned by a Source for a file the feed does not have.
var ErrNotFound = errors.New("not in the feed")

// Source reads the files of one feed.
type Source interface {
	// ReadFile returns the file at path (relative to the feed's root), at
	// most max bytes (more is an error).
	ReadFile(ctx context.Context, path string, max int64) ([]byte, error)
	// Open returns the file's total size and a reader from offset on.
	Open(ctx context.Context, path string, offset int64) (int64, io.ReadCloser, error)
	// String names the feed in errors.
	String() string
}

// NewSource returns the Source of a feed url (resource.ParseFeedURL):
// HTTP(S) through client, or a directory.
func NewSource(rawURL string, client *http.Client) (Source, error) {
	kind, clean, err := resource.ParseFeedURL(rawURL)
	if err != nil {
		return nil, err
	}
	if kind == resource.FeedDir {
		return dirSource(clean), nil
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &httpSource{base: strings.TrimSuffix(clean, "/") + "/", client: client}, nil
}

// dirSource is a feed in a directory of the hub's file system.
type dirSource string

func (d dirSource) String() string { return string(d) }

func (d dirSource) path(p string) string { return filepath.Join(string(d), filepath.FromSlash(p)) }

func (d dirSource) ReadFile(_ context.Context, p string, max int64) ([]byte, error) {
	_, r, err := d.Open(context.Background(), p, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readLimited(r, p, max)
}

func (d dirSource) Open(_ context.Context, p string, offset int64) (int64, io.ReadCloser, error) {
	f, err := os.Open(d.path(p))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	if err != nil {
		return 0, nil, err
	}
	st, err := f.Stat()
	if err == nil {
		_, err = f.Seek(offset, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return 0, nil, err
	}
	return st.Size(), f, nil
}

// httpSource is a feed on a web server.
type httpSource struct {
	base   string
	client *http.Client
}

func (h *httpSource) String() string { return h.base }

func (h *httpSource) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	_, r, err := h.Open(ctx, p, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readLimited(r, p, max)
}

// Open GETs the file, from offset with a Range request; a server that
// ignores Range is read from the start and skipped forward.
func (h *httpSource) Open(ctx context.Context, p string, offset int64) (int64, io.ReadCloser, error) {
	u := h.base + (&url.URL{Path: p}).EscapedPath()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	if offset > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		size := resp.ContentLength
		if offset > 0 {
			if _, err := io.CopyN(io.Discard, resp.Body, offset); err != nil {
				resp.Body.Close()
				return 0, nil, fmt.Errorf("GET %s: %w", u, err)
			}
		}
		return size, resp.Body, nil
	case http.StatusPartialContent:
		var start, end, total int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &start, &end, &total); err != nil || start != offset {
			resp.Body.Close()
			return 0, nil, fmt.Errorf("GET %s: bad Content-Range %q for offset %d", u, resp.Header.Get("Content-Range"), offset)
		}
		return total, resp.Body, nil
	case http.StatusRequestedRangeNotSatisfiable:
		resp.Body.Close()
		var total int64
		fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes */%d", &total)
		return total, io.NopCloser(strings.NewReader("")), nil
	case http.StatusNotFound:
		resp.Body.Close()
		return 0, nil, fmt.Errorf("GET %s: %w", u, ErrNotFound)
	default:
		resp.Body.Close()
		return 0, nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
}

func readLimited(r io.Reader, p string, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, max)
	}
	return data, nil
}

// blobSource is a feed as a blobs.Source for the artifacts of one
// release: the artifact of digest is at feed.BlobPath(digest), and its
// size must be the one the signed manifest gives (sizes).
type blobSource struct {
	src   Source
	sizes map[string]int64
}

func (b blobSource) String() string { return "feed " + b.src.String() }

func (b blobSource) Open(ctx context.Context, digest string, offset int64) (int64, io.ReadCloser, error) {
	want, ok := b.sizes[digest]
	if !ok {
		return 0, nil, fmt.Errorf("%w: sha256 %s is not an artifact of the release", blobs.ErrNotFound, digest)
	}
	size, r, err := b.src.Open(ctx, feed.BlobPath(digest), offset)
	if errors.Is(err, ErrNotFound) {
		return 0, nil, fmt.Errorf("%w: %v", blobs.ErrNotFound, err)
	}
	if err != nil {
		return 0, nil, err
	}
	if size >= 0 && size != want {
		r.Close()
		return 0, nil, fmt.Errorf("%s is %d bytes, the signed manifest says %d", feed.BlobPath(digest), size, want)
	}
	return want, r, nil
}
