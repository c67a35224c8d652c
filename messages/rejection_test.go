package messages

import (
	"strings"
	"testing"
)

// Every event that reports a refused command carries its reason as a
// Rejection, so the rejection metric sees it.
func TestRejectionEventsAreRejections(t *testing.T) {
	n := 0
	for typ, s := range events {
		if !strings.HasSuffix(string(typ), "-rejected") {
			continue
		}
		n++
		if _, ok := s.new().(Rejection); !ok {
			t.Errorf("%s: its payload is not a Rejection", typ)
		}
	}
	if n == 0 {
		t.Fatal("no rejection event in the catalogue")
	}
}
