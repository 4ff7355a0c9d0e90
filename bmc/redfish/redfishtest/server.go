package redfishtest

import (
	"crypto/subtle"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
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
