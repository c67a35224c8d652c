package provider

import (
	"net/http"
	"strings"
	"sync"
)

// Stub is an in-memory provider for local runs and tests: it knows the
// sandboxes it is given and deletes them on request.
type Stub struct {
	mu        sync.Mutex
	sandboxes map[string]bool
	deletes   map[string]int
	// Fail, when set, decides per external ID whether a deletion fails
	// with 503, to play a provider outage.
	Fail func(externalID string) bool
}

// NewStub returns a stub holding the given sandboxes.
func NewStub(externalIDs ...string) *Stub {
	s := &Stub{sandboxes: map[string]bool{}, deletes: map[string]int{}}
	for _, id := range externalIDs {
		s.sandboxes[id] = true
	}
	return s
}

// Deletes reports how many DELETE requests reached the stub for id.
func (s *Stub) Deletes(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deletes[id]
}

// Has reports whether the stub still holds id.
func (s *Stub) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes[id]
}

// ServeHTTP answers DELETE /sandboxes/{id}.
func (s *Stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, "/sandboxes/")
	if r.Method != http.MethodDelete || !ok || id == "" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes[id]++
	if s.Fail != nil && s.Fail(id) {
		http.Error(w, "provider unavailable", http.StatusServiceUnavailable)
		return
	}
	if !s.sandboxes[id] {
		http.NotFound(w, r)
		return
	}
	delete(s.sandboxes, id)
	w.WriteHeader(http.StatusNoContent)
}
