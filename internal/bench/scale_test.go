package bench

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"transit/internal/metering"
	"transit/messages"
	"transit/service"
)

// A command answered again with the same outcome is a repeat; with
// another, it was applied twice. Only the first answer reaches its waiter.
func TestStackAnswer_tells_repeated_from_doubled(t *testing.T) {
	s := &stack{waiters: map[string]chan service.TapEvent{}, outcomes: map[string]string{}}
	waiter := make(chan service.TapEvent, 1)
	s.waiters["c1"] = waiter
	answer := func(cmd string, t messages.Type, payload string) chan service.TapEvent {
		return s.answer(service.TapEvent{Envelope: messages.Envelope{CausationID: cmd, Type: t, Payload: json.RawMessage(payload)}})
	}
	assert.Equal(t, waiter, answer("c1", messages.SandboxAllocated, `{"sandbox_id":"a"}`))
	assert.Nil(t, answer("c1", messages.SandboxAllocated, `{"sandbox_id":"a"}`))
	assert.Nil(t, answer("c1", messages.SandboxAllocated, `{"sandbox_id":"b"}`))
	assert.Nil(t, answer("c2", messages.SandboxAllocated, `{"sandbox_id":"b"}`), "nobody waits for c2")
	assert.EqualValues(t, 1, s.repeats.Load())
	assert.EqualValues(t, 1, s.doubled.Load())
}

// Replicas' figures add up; neither process's maps are changed.
func TestSumReports_adds_processes(t *testing.T) {
	a := metering.Report{Requests: map[string]int64{"SNS.Publish": 2}, Units: map[string]float64{"write Audit": 1}, CPU: time.Second, Mallocs: 3, WriteUnits: 1}
	b := metering.Report{Requests: map[string]int64{"SNS.Publish": 3, "SQS.ReceiveMessage": 1}, CPU: 2 * time.Second, Mallocs: 4, WriteUnits: 2}
	sum := sumReports(a, b)
	assert.Equal(t, map[string]int64{"SNS.Publish": 5, "SQS.ReceiveMessage": 1}, sum.Requests)
	assert.Equal(t, map[string]float64{"write Audit": 1}, sum.Units)
	assert.Equal(t, 3*time.Second, sum.CPU)
	assert.EqualValues(t, 7, sum.Mallocs)
	assert.InDelta(t, 3, sum.WriteUnits, 1e-9)
	assert.Equal(t, map[string]int64{"SNS.Publish": 2}, a.Requests)
}

// A replica's timer shards are found by its process ID, not by a longer
// one that starts with the same digits.
func TestTimersOfPID_matches_whole_pid(t *testing.T) {
	ow := ownership{timers: map[string]int{"vm/123/ab12cd34": 3, "vm/1234/ef56ab78": 5, "": 0}}
	assert.Equal(t, 3, ow.timersOfPID(123))
	assert.Equal(t, 5, ow.timersOfPID(1234))
	assert.Equal(t, 0, ow.timersOfPID(12))
}
