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
	fail      func(externalID string) bool
}

// FailWhen makes deletions for which f returns true fail with 503, to play
// a provider outage; nil heals it. Safe while the stub serves.
func (s *Stub) FailWhen(f func(externalID string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = f
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
	f := s.fail
	s.mu.Unlock()
	// f runs outside the lock, so it may ask the stub questions.
	fail := f != nil && f(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes[id]++
	if fail {
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
