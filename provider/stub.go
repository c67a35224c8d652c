package provider

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Stub is an in-memory provider for local runs and tests: it lists the
// sandboxes it is given, a page at a time, and deletes them on request.
type Stub struct {
	mu        sync.Mutex
	sandboxes map[string]Sandbox
	deletes   map[string]int
	lists     int
	pageSize  int
	fail      func(externalID string) bool
}

// FailWhen makes deletions for which f returns true fail with 503, to play
// a provider outage; nil heals it. Safe while the stub serves.
func (s *Stub) FailWhen(f func(externalID string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = f
}

// NewStub returns a stub holding the given sandboxes, each listed with its
// ID as its name and a four-hour lab.
func NewStub(externalIDs ...string) *Stub {
	s := &Stub{sandboxes: map[string]Sandbox{}, deletes: map[string]int{}, pageSize: 100}
	for _, id := range externalIDs {
		s.sandboxes[id] = Sandbox{ExternalID: id, Name: id, LabDurationHours: 4}
	}
	return s
}

// Put adds sandboxes to the stub, or replaces those with the same ID.
func (s *Stub) Put(sandboxes ...Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range sandboxes {
		s.sandboxes[sb.ExternalID] = sb
	}
}

// SetPageSize sets how many sandboxes one GET /sandboxes answers with
// (100 unless set), so a test can make a small list take several pages.
func (s *Stub) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = max(n, 1)
}

// Deletes reports how many DELETE requests reached the stub for id.
func (s *Stub) Deletes(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deletes[id]
}

// Lists reports how many listings (first pages of GET /sandboxes) reached
// the stub.
func (s *Stub) Lists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// Has reports whether the stub still holds id.
func (s *Stub) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.sandboxes[id]
	return ok
}

// ServeHTTP answers GET /sandboxes[?page_token=N] and DELETE /sandboxes/{id}.
func (s *Stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/sandboxes" {
		s.list(w, r)
		return
	}
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
	if _, ok := s.sandboxes[id]; !ok {
		http.NotFound(w, r)
		return
	}
	delete(s.sandboxes, id)
	w.WriteHeader(http.StatusNoContent)
}

// list answers one page, in external ID order; the token is the offset
// of the next page.
func (s *Stub) list(w http.ResponseWriter, r *http.Request) {
	offset := 0
	if tok := r.URL.Query().Get("page_token"); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 {
			http.Error(w, "bad page_token", http.StatusBadRequest)
			return
		}
		offset = n
	}
	s.mu.Lock()
	if offset == 0 {
		s.lists++
	}
	ids := make([]string, 0, len(s.sandboxes))
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	page := Page{Sandboxes: []Sandbox{}}
	end := min(offset+s.pageSize, len(ids))
	for _, id := range ids[min(offset, end):end] {
		page.Sandboxes = append(page.Sandboxes, s.sandboxes[id])
	}
	if end < len(ids) {
		page.NextPageToken = strconv.Itoa(end)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}
