package redfishtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
)

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
