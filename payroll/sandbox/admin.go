package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// maxAdminBody bounds a PUT /_sandbox/faults body.
const maxAdminBody = 1 << 20

// adminRoutes registers the /_sandbox/ endpoints for tests and operators.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_sandbox/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.State())
	})
	mux.HandleFunc("GET /_sandbox/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(s.Faults()))
	})
	mux.HandleFunc("PUT /_sandbox/faults", s.handlePutFaults)
	mux.HandleFunc("POST /_sandbox/revoke", func(w http.ResponseWriter, r *http.Request) {
		s.RevokeAll()
		writeJSON(w, http.StatusOK, map[string]bool{"revoked": true})
	})
	mux.HandleFunc("POST /_sandbox/refresh-token", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"refresh_token": s.IssueRefreshToken()})
	})
}

// handlePutFaults replaces the faults with the JSON list in the body and
// answers with the new list.
func (s *Server) handlePutFaults(w http.ResponseWriter, r *http.Request) {
	var fs []Fault
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err := dec.Decode(&fs); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "decode faults: " + err.Error()})
		return
	}
	for i, f := range fs {
		if err := f.validate(); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("fault %d: %v", i, err)})
			return
		}
	}
	s.SetFaults(fs...)
	writeJSON(w, http.StatusOK, nonNil(s.Faults()))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
