package redfishtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

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
