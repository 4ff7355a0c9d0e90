package redfishtest

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resource paths the emulator serves.
const (
	SystemPath       = "/redfish/v1/Systems/1"
	ManagerPath      = "/redfish/v1/Managers/BMC"
	VirtualMediaPath = ManagerPath + "/VirtualMedia/Cd"
	SessionsPath     = "/redfish/v1/SessionService/Sessions"
)

// Fault is a failure the emulator plays instead of serving.
type Fault int

// Faults.
const (
	// FaultNone serves normally.
	FaultNone Fault = iota
	// FaultUnauthorized refuses every credential (HTTP 401).
	FaultUnauthorized
	// FaultServerError answers every request but the service root with
	// HTTP 500 and a Redfish InternalError message.
	FaultServerError
	// FaultHang accepts requests and never answers (until the client gives
	// up or the server closes).
	FaultHang
)

// Config configures a Server.
type Config struct {
	// Username and Password are the one account; default admin / password.
	Username, Password string
	// Machine is the server the BMC controls.
	Machine *QEMU
	// PlainHTTP serves HTTP instead of HTTPS (addresses redfish+http://).
	PlainHTTP bool
	// RequireIfMatch refuses a PATCH without If-Match (HTTP 428), as some
	// BMCs do.
	RequireIfMatch bool
}

// Request is one request the emulator received, without credentials.
type Request struct {
	Method, Path string
	// Auth is how it authenticated: "basic", "session" or "".
	Auth    string
	IfMatch string
}

// Server is a Redfish service for one ComputerSystem backed by a QEMU.
type Server struct {
	cfg     Config
	srv     *httptest.Server
	closing chan struct{}
	dir     string // downloaded media

	mu          sync.Mutex
	fault       Fault
	generation  int // bumped on every change of the system; the ETag
	bootTarget  string
	bootEnabled string
	image       string // the Image URL inserted
	inserted    bool
	writeProt   bool
	downloads   int
	sessions    map[string]string // token → session id
	nextSession int
	requests    []Request
}

// NewServer starts a Redfish service for cfg.Machine. Close it.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Machine == nil {
		return nil, errors.New("redfishtest: no machine")
	}
	if cfg.Username == "" {
		cfg.Username = "admin"
	}
	if cfg.Password == "" {
		cfg.Password = "password"
	}
	dir, err := os.MkdirTemp("", "bmcemu-media-")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, closing: make(chan struct{}), dir: dir,
		bootTarget: "None", bootEnabled: "Disabled", writeProt: true, sessions: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /redfish/v1", s.serviceRoot)
	mux.HandleFunc("GET /redfish/v1/{$}", s.serviceRoot)
	mux.HandleFunc("GET /redfish/v1/Systems", s.collection("/redfish/v1/Systems", "Computer System Collection", SystemPath))
	mux.HandleFunc("GET "+SystemPath, s.getSystem)
	mux.HandleFunc("PATCH "+SystemPath, s.patchSystem)
	mux.HandleFunc("POST "+SystemPath+"/Actions/ComputerSystem.Reset", s.reset)
	mux.HandleFunc("GET /redfish/v1/Managers", s.collection("/redfish/v1/Managers", "Manager Collection", ManagerPath))
	mux.HandleFunc("GET "+ManagerPath, s.getManager)
	mux.HandleFunc("GET "+ManagerPath+"/VirtualMedia", s.collection(ManagerPath+"/VirtualMedia", "Virtual Media Collection", VirtualMediaPath))
	mux.HandleFunc("GET "+VirtualMediaPath, s.getVirtualMedia)
	mux.HandleFunc("POST "+VirtualMediaPath+"/Actions/VirtualMedia.InsertMedia", s.insertMedia)
	mux.HandleFunc("POST "+VirtualMediaPath+"/Actions/VirtualMedia.EjectMedia", s.ejectMedia)
	mux.HandleFunc("GET /redfish/v1/SessionService", s.sessionService)
	mux.HandleFunc("GET "+SessionsPath, s.listSessions)
	mux.HandleFunc("POST "+SessionsPath, s.createSession)
	mux.HandleFunc("DELETE "+SessionsPath+"/{id}", s.deleteSession)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+r.URL.Path+" was not found.")
	})
	h := s.middleware(mux)
	if cfg.PlainHTTP {
		s.srv = httptest.NewServer(h)
	} else {
		s.srv = httptest.NewTLSServer(h)
	}
	return s, nil
}

// Close stops the server (ending hanging requests) and removes downloaded
// media. It leaves the machine as it is.
func (s *Server) Close() {
	close(s.closing)
	s.srv.Close()
	os.RemoveAll(s.dir)
}

// Address is the BMC address of the system, redfish+https://127.0.0.1:PORT/redfish/v1/Systems/1.
func (s *Server) Address() string {
	u, _ := url.Parse(s.srv.URL)
	return "redfish+" + u.Scheme + "://" + u.Host + SystemPath
}

// CertPool trusts the server's TLS certificate.
func (s *Server) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	if c := s.srv.Certificate(); c != nil {
		pool.AddCert(c)
	}
	return pool
}

// SetFault makes the server play f from the next request on.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// SetBootOverride changes the boot override behind the client's back (as
// another BMC user would), which changes the system's ETag.
func (s *Server) SetBootOverride(target, enabled string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootTarget, s.bootEnabled = target, enabled
	s.generation++
}

// BootOverride is the current BootSourceOverrideTarget and
// BootSourceOverrideEnabled.
func (s *Server) BootOverride() (target, enabled string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bootTarget, s.bootEnabled
}

// Requests are the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Sessions is the number of open sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// middleware records requests, plays faults and checks credentials (the
// service root and session creation need none).
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open := r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1" ||
			r.Method == http.MethodPost && r.URL.Path == SessionsPath
		s.mu.Lock()
		fault := s.fault
		auth := s.authLocked(r)
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Auth: auth, IfMatch: r.Header.Get("If-Match")})
		s.mu.Unlock()
		switch {
		case fault == FaultHang:
			select {
			case <-r.Context().Done():
			case <-s.closing:
			}
			// Abort: a hanging BMC never answers, not even with an
			// empty 200 once the client has gone.
			panic(http.ErrAbortHandler)
		case fault == FaultServerError && !(r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1"):
			writeError(w, http.StatusInternalServerError, "Base.1.8.InternalError", "The request failed due to an internal service error.  The service is still operational.")
			return
		case !open && (auth == "" || fault == FaultUnauthorized):
			w.Header().Set("WWW-Authenticate", `Basic realm="redfish"`)
			writeError(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "There is no valid session established with the implementation.")
			return
		}
		w.Header().Set("OData-Version", "4.0")
		next.ServeHTTP(w, r)
	})
}

// authLocked is "basic" or "session" for valid credentials, "" otherwise.
func (s *Server) authLocked(r *http.Request) string {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		if _, ok := s.sessions[tok]; ok {
			return "session"
		}
		return ""
	}
	if u, p, ok := r.BasicAuth(); ok && s.credentialsMatch(u, p) {
		return "basic"
	}
	return ""
}

func (s *Server) credentialsMatch(user, password string) bool {
	return subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(password), []byte(s.cfg.Password)) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError writes a Redfish error with one @Message.ExtendedInfo entry.
func writeError(w http.ResponseWriter, status int, messageID, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code":    messageID,
		"message": message,
		"@Message.ExtendedInfo": []any{map[string]any{
			"@odata.type": "#Message.v1_1_1.Message",
			"MessageId":   messageID,
			"Message":     message,
			"Severity":    "Critical",
			"Resolution":  "None.",
		}},
	}})
}

func (s *Server) serviceRoot(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.type":    "#ServiceRoot.v1_15_0.ServiceRoot",
		"@odata.id":      "/redfish/v1",
		"Id":             "RootService",
		"Name":           "Roost BMC emulator",
		"RedfishVersion": "1.15.0",
		"Systems":        map[string]any{"@odata.id": "/redfish/v1/Systems"},
		"Managers":       map[string]any{"@odata.id": "/redfish/v1/Managers"},
		"SessionService": map[string]any{"@odata.id": "/redfish/v1/SessionService"},
		"Links":          map[string]any{"Sessions": map[string]any{"@odata.id": SessionsPath}},
	})
}

func (s *Server) collection(path, name string, members ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		refs := []any{}
		for _, m := range members {
			refs = append(refs, map[string]any{"@odata.id": m})
		}
		writeJSON(w, http.StatusOK, map[string]any{"@odata.id": path, "Name": name, "Members": refs, "Members@odata.count": len(refs)})
	}
}

// etagLocked is the system's current ETag.
func (s *Server) etagLocked() string {
	return `W/"` + strconv.Itoa(s.generation) + `"`
}

func (s *Server) getSystem(w http.ResponseWriter, r *http.Request) {
	power := "Off"
	if s.cfg.Machine.Running() {
		power = "On"
	}
	s.mu.Lock()
	etag := s.etagLocked()
	body := map[string]any{
		"@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
		"@odata.id":   SystemPath,
		"@odata.etag": etag,
		"Id":          "1",
		"Name":        "QEMU",
		"SystemType":  "Virtual",
		"PowerState":  power,
		"Boot": map[string]any{
			"BootSourceOverrideTarget":                         s.bootTarget,
			"BootSourceOverrideEnabled":                        s.bootEnabled,
			"BootSourceOverrideMode":                           "Legacy",
			"BootSourceOverrideTarget@Redfish.AllowableValues": bootTargets,
		},
		"Links": map[string]any{"ManagedBy": []any{map[string]any{"@odata.id": ManagerPath}}},
		"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
			"target":                            SystemPath + "/Actions/ComputerSystem.Reset",
			"ResetType@Redfish.AllowableValues": resetTypes,
		}},
	}
	s.mu.Unlock()
	w.Header().Set("ETag", etag)
	writeJSON(w, http.StatusOK, body)
}

var (
	bootTargets = []string{"None", "Pxe", "Cd", "Hdd", "UefiHttp"}
	bootEnabled = []string{"Disabled", "Once", "Continuous"}
	resetTypes  = []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "PowerCycle"}
	// bootLetters are QEMU's -boot drive letters for the targets.
	bootLetters = map[string]string{"Pxe": "n", "Cd": "d", "Hdd": "c", "UefiHttp": "n"}
)

func (s *Server) patchSystem(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Boot *struct {
			BootSourceOverrideTarget  *string
			BootSourceOverrideEnabled *string
		}
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ifMatch := r.Header.Get("If-Match")
	switch {
	case ifMatch == "" && s.cfg.RequireIfMatch:
		writeError(w, http.StatusPreconditionRequired, "Base.1.8.PreconditionRequired", "A precondition header or annotation is required to change the resource.")
		return
	case ifMatch != "" && ifMatch != "*" && ifMatch != s.etagLocked():
		writeError(w, http.StatusPreconditionFailed, "Base.1.8.PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.")
		return
	}
	if req.Boot == nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyUnknown", "Only Boot can be changed.")
		return
	}
	target, enabled := s.bootTarget, s.bootEnabled
	if v := req.Boot.BootSourceOverrideTarget; v != nil {
		if !slices.Contains(bootTargets, *v) {
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", fmt.Sprintf("The value %q for the property BootSourceOverrideTarget is not in the list of acceptable values.", *v))
			return
		}
		target = *v
	}
	if v := req.Boot.BootSourceOverrideEnabled; v != nil {
		if !slices.Contains(bootEnabled, *v) {
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", fmt.Sprintf("The value %q for the property BootSourceOverrideEnabled is not in the list of acceptable values.", *v))
			return
		}
		enabled = *v
	}
	s.bootTarget, s.bootEnabled = target, enabled
	s.generation++
	w.WriteHeader(http.StatusNoContent)
}

// bootForStart is the -boot setting for the next start; a Once override is
// used up by it.
func (s *Server) bootForStart() Boot {
	s.mu.Lock()
	defer s.mu.Unlock()
	letter := bootLetters[s.bootTarget]
	if letter == "" || s.bootEnabled == "Disabled" {
		return Boot{}
	}
	b := Boot{Device: letter, Once: s.bootEnabled == "Once"}
	if b.Once {
		s.bootTarget, s.bootEnabled = "None", "Disabled"
	}
	s.generation++
	return b
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	var req struct{ ResetType string }
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.ResetType == "" {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.")
		return
	}
	m := s.cfg.Machine
	ctx := r.Context()
	var err error
	switch req.ResetType {
	case "On":
		if !m.Running() {
			err = m.PowerOn(ctx, s.bootForStart())
		}
	case "ForceOff":
		err = m.PowerOff(ctx)
	case "GracefulShutdown":
		if m.Running() {
			_, err = m.run("system_powerdown", nil)
		}
	case "ForceRestart", "PowerCycle":
		// The boot override is on QEMU's command line: restart the process.
		if err = m.PowerOff(ctx); err == nil {
			err = m.PowerOn(ctx, s.bootForStart())
		}
	default:
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterNotSupported", fmt.Sprintf("The parameter ResetType=%s is not supported by the action ComputerSystem.Reset.", req.ResetType))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Base.1.8.InternalError", "Reset failed: "+err.Error())
		return
	}
	s.mu.Lock()
	s.generation++
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

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
		"ImageName":      nilIfEmpty(path(s.image)),
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

// path is the last element of a URL's path.
func path(image string) string {
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

func (s *Server) sessionService(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.type":    "#SessionService.v1_1_9.SessionService",
		"@odata.id":      "/redfish/v1/SessionService",
		"Id":             "SessionService",
		"ServiceEnabled": true,
		"Sessions":       map[string]any{"@odata.id": SessionsPath},
	})
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var ids []string
	for _, id := range s.sessions {
		ids = append(ids, SessionsPath+"/"+id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	s.collection(SessionsPath, "Session Collection", ids...)(w, r)
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req struct{ UserName, Password string }
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fault == FaultUnauthorized || !s.credentialsMatch(req.UserName, req.Password) {
		writeError(w, http.StatusUnauthorized, "Base.1.8.ResourceAtUriUnauthorized", "While accessing the resource at /redfish/v1/SessionService/Sessions, the service received an authorization error.")
		return
	}
	s.nextSession++
	id := strconv.Itoa(s.nextSession)
	token := fmt.Sprintf("emulator-token-%d-%d", s.nextSession, time.Now().UnixNano())
	s.sessions[token] = id
	w.Header().Set("X-Auth-Token", token)
	w.Header().Set("Location", SessionsPath+"/"+id)
	writeJSON(w, http.StatusCreated, map[string]any{
		"@odata.type": "#Session.v1_7_0.Session",
		"@odata.id":   SessionsPath + "/" + id,
		"Id":          id,
		"UserName":    req.UserName,
	})
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, sid := range s.sessions {
		if sid == id {
			delete(s.sessions, tok)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+r.URL.Path+" was not found.")
}

// ExpireSessions drops every session, as a BMC reboot or session timeout
// does.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
}
