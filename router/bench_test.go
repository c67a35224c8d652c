package router_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"transit/messages"
)

// BenchmarkRouter_dispatch is one command through the real middleware
// chain and codec on the in-memory pub/sub, to its event: everything
// transit adds per command except AWS.
func BenchmarkRouter_dispatch(b *testing.B) {
	t := &testing.T{}
	h := newHarness(t, &scriptedHandler{})
	body, err := messages.NewCommand(uuid.NewString(), messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.send(t, string(body), nil)
		(<-h.out).Ack()
	}
}
