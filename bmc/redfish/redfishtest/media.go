package redfishtest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

func (s *Server) getManager(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.type":  "#Manager.v1_19_0.Manager",
		"@odata.id":    ManagerPath,
		"Id":           "BMC",
		"Name":         "Emulated BMC",
		"ManagerType":  "BMC",
		"VirtualMedia": map[string]any{"@odata.id": ManagerPath + "/VirtualMedia"},
		"Links":        map[string]any{"ManagerForServers": []any{map[string]any{"@odata.id": SystemPath}}},
	})
}

func (s *Server) getVirtualMedia(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body := map[string]any{
		"@odata.type":    "#VirtualMedia.v1_6_0.VirtualMedia",
		"@odata.id":      VirtualMediaPath,
		"Id":             "Cd",
		"Name":           "Virtual CD",
		"MediaTypes":     []string{"CD", "DVD"},
		"ConnectedVia":   "URI",
		"Image":          nilIfEmpty(s.image),
		"ImageName":      nilIfEmpty(imageName(s.image)),
		"Inserted":       s.inserted,
		"WriteProtected": s.writeProt,
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": VirtualMediaPath + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": VirtualMediaPath + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// imageName is the last element of an image URL's path.
func imageName(image string) string {
	if image == "" {
		return ""
	}
	u, err := url.Parse(image)
	if err != nil {
		return ""
	}
	return filepath.Base(u.Path)
}

func (s *Server) insertMedia(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Image          string
		Inserted       *bool
		WriteProtected *bool
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Image == "" {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.")
		return
	}
	if req.Inserted != nil && !*req.Inserted {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterNotSupported", "Inserted=false is not supported.")
		return
	}
	file, err := s.fetch(r.Context(), req.Image)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterValueFormatError", fmt.Sprintf("The value for the parameter Image in the action VirtualMedia.InsertMedia is invalid: %v", err))
		return
	}
	if err := s.cfg.Machine.InsertMedia(file); err != nil {
		writeError(w, http.StatusInternalServerError, "Base.1.8.InternalError", "InsertMedia failed: "+err.Error())
		return
	}
	s.mu.Lock()
	s.image, s.inserted = req.Image, true
	s.writeProt = req.WriteProtected == nil || *req.WriteProtected
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// fetch downloads the image at an http(s) URL into the media directory (a
// file:// URL is used in place) and returns the local file.
func (s *Server) fetch(ctx context.Context, image string) (string, error) {
	u, err := url.Parse(image)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "file":
		if _, err := os.Stat(u.Path); err != nil {
			return "", err
		}
		return u.Path, nil
	case "http", "https":
	default:
		return "", fmt.Errorf("scheme %q: want http, https or file", u.Scheme)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return "", err
	}
	// Like many BMCs, the emulator does not check the media server's
	// certificate.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test emulator
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	s.mu.Lock()
	s.downloads++
	name := filepath.Join(s.dir, fmt.Sprintf("media-%d.iso", s.downloads))
	s.mu.Unlock()
	f, err := os.Create(name)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	return name, f.Close()
}

func (s *Server) ejectMedia(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Machine.EjectMedia(); err != nil {
		writeError(w, http.StatusInternalServerError, "Base.1.8.InternalError", "EjectMedia failed: "+err.Error())
		return
	}
	s.mu.Lock()
	s.image, s.inserted, s.writeProt = "", false, true
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
