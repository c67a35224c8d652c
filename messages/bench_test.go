package messages_test

import (
	"testing"
	"time"

	"transit/messages"
)

func BenchmarkDecode_allocate(b *testing.B) {
	body, err := messages.NewCommand("6f1c5e0a-4b5e-4c39-9d1e-7a0f3f5f8b21", messages.SandboxAllocate,
		messages.SandboxAllocatePayload{TrackID: "track-123"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := messages.Decode(body, messages.Meta{Type: string(messages.SandboxAllocate)}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode_allocated(b *testing.B) {
	cause := messages.Command{ID: "6f1c5e0a-4b5e-4c39-9d1e-7a0f3f5f8b21", CorrelationID: "c"}
	out := messages.Out{Type: messages.SandboxAllocated, At: time.Now(), Payload: messages.SandboxAllocatedPayload{
		SandboxID: "0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f", ExternalID: "ext-1", Name: "lab-1", TrackID: "track-123",
		IdempotencyKey: "track-123", AllocatedAt: 1759567084, ExpiresAt: 1759581484,
	}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := messages.Encode(cause, out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDerivedID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		messages.DerivedID("6f1c5e0a-4b5e-4c39-9d1e-7a0f3f5f8b21", messages.SandboxAllocated, "")
	}
}
