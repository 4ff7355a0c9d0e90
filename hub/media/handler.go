package media

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"
)

// PathPrefix is where the handler is mounted: an image is at
// PathPrefix + SERVER/TOKEN/enroll.iso.
const PathPrefix = "/media/v1/"

// Handler serves enrollment ISOs to BMCs under download tokens.
type Handler struct {
	// Key returns the token key (see Key), nil while the hub has no CA.
	Key func() []byte
	// Open opens the blob with the hex sha256 digest and returns its size.
	Open func(digest string) (*os.File, int64, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log, if set, gets one record per refused request (never the token).
	Log *slog.Logger
}

// URL is the address of server's image under token at base (the scheme
// and authority the BMC reaches the hub by, e.g. https://hub:9443).
func URL(base, server, token string) string {
	return base + PathPrefix + server + "/" + token + "/enroll.iso"
}

// Register mounts the handler on mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("GET "+PathPrefix+"{server}/{token}/enroll.iso", h)
	mux.Handle("HEAD "+PathPrefix+"{server}/{token}/enroll.iso", h)
}

// ServeHTTP serves the image a valid token grants, with Range support
// (BMCs read virtual media in ranges). It answers 403 for a token that
// is forged, expired or made for another Server, 404 for an image the
// member does not hold, 503 while the hub has no CA.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	server, token := r.PathValue("server"), r.PathValue("token")
	key := h.Key()
	if key == nil {
		http.Error(w, "the hub CA is not replicated yet", http.StatusServiceUnavailable)
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	digest, err := Verify(key, server, token, now())
	if err != nil {
		if h.Log != nil {
			h.Log.Warn("virtual media download refused", "server", server, "remote", r.RemoteAddr, "err", err)
		}
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	f, size, err := h.Open(digest)
	if err != nil {
		http.Error(w, "image not stored on this hub member", http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/x-iso9660-image")
	http.ServeContent(w, r, "enroll.iso", time.Time{}, io.NewSectionReader(f, 0, size))
}
