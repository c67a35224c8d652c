package service_test

// Linearizability of sandbox allocation, checked with porcupine
// (DECISIONS.md). The concurrent tests record every delivery of a command
// as an operation: sent by the producer at one time, answered by the event
// the test's tap saw at a later one, with what it asked and what it was
// answered. Porcupine then looks for one order of all operations, each
// placed somewhere inside its own interval, in which a pool taking one
// command at a time (the specification below, after docs/sandbox.md) gives
// every answer that was given. None found: two commands saw the pool in
// states no single order explains, e.g. two holders got the same sandbox.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/machine"
	"transit/messages"
	"transit/service"
)

// input is what one delivery of a command asked, as a specification
// reads it: the sandbox broker's allocInput, the task queue's leaseInput.
type input interface {
	commandID() string
	// answer reads what an event of the command answered.
	answer(ev service.TapEvent) (any, error)
}

// allocInput is what one delivery of a command asked.
type allocInput struct {
	Type      messages.Type
	TrackID   string
	Key       string // the idempotency key as sent; "" stands for the track
	CommandID string
}

// allocOutput is what it was answered: a sandbox, or a rejection's reason.
type allocOutput struct {
	SandboxID string
	Reason    string
}

// holder is whom an allocation is for: a track under an idempotency key.
type holder struct{ track, key string }

func (in allocInput) commandID() string { return in.CommandID }

func (in allocInput) answer(ev service.TapEvent) (any, error) { return outputOf(ev) }

func (in allocInput) holder() holder {
	return holder{track: in.TrackID, key: cmp.Or(in.Key, in.TrackID)}
}

// poolState is the pool as the specification sees it. Porcupine keeps
// states to backtrack to, so a step returns a changed copy and never
// changes the state it was given.
type poolState struct {
	available map[string]bool        // sandbox IDs free to allocate
	live      map[holder]string      // each holder's sandbox
	outcomes  map[string]allocOutput // command ID → the answer it got first
}

func newPoolState(sandboxIDs []string) poolState {
	s := poolState{available: map[string]bool{}, live: map[holder]string{}, outcomes: map[string]allocOutput{}}
	for _, id := range sandboxIDs {
		s.available[id] = true
	}
	return s
}

// answered is s after command id was answered out; allocated, when set,
// is the sandbox that answer took from the pool for h.
func (s poolState) answered(id string, out allocOutput, h holder, allocated string) poolState {
	next := s
	next.outcomes = maps.Clone(s.outcomes)
	next.outcomes[id] = out
	if allocated != "" {
		next.available = maps.Clone(s.available)
		delete(next.available, allocated)
		next.live = maps.Clone(s.live)
		next.live[h] = allocated
	}
	return next
}

func (s poolState) equal(o poolState) bool {
	return maps.Equal(s.available, o.available) && maps.Equal(s.live, o.live) && maps.Equal(s.outcomes, o.outcomes)
}

// String describes s for the visualisation, which shows it after every
// step: past a few holders, it counts them rather than naming them.
func (s poolState) String() string {
	var held []string
	for h, sb := range s.live {
		held = append(held, fmt.Sprintf("%s/%s→%s", h.track, h.key, short(sb)))
	}
	slices.Sort(held)
	if len(held) > 12 {
		held = append(held[:12], fmt.Sprintf("and %d more", len(held)-12))
	}
	return fmt.Sprintf("%d available, %d answered; held: %s", len(s.available), len(s.outcomes), strings.Join(held, ", "))
}

// spec is a sequential specification of the sandbox broker: whether out
// is a legal answer to in from state s, and the state after it. It is a
// plain function so that a state machine's declared decide(state,
// command) can take its place through an adapter; the adapter has to
// accept any available sandbox where decide picks one.
type spec func(s poolState, in allocInput, out allocOutput) (ok bool, next poolState)

// allocateSpec is sandbox.allocate over the pool. Which sandboxes an
// allocation may take, and so when the pool is exhausted, is what the
// sandbox machine's declared allocate transition decides on each
// sandbox's item; what the pool adds is the recorded answer of a
// redelivery and the live allocation a key already names.
func allocateSpec(s poolState, in allocInput, out allocOutput) (bool, poolState) {
	if first, ok := s.outcomes[in.CommandID]; ok {
		// A redelivery gets the recorded answer, whatever the pool is now.
		return out == first, s
	}
	if in.Type != messages.SandboxAllocate {
		return false, s
	}
	h := in.holder()
	legal, allocated := false, ""
	switch sb, held := s.live[h]; {
	case held:
		// The holder's live allocation under this key, not a second one.
		legal = out == allocOutput{SandboxID: sb}
	case out.Reason == messages.ReasonPoolExhausted:
		legal = !slices.ContainsFunc(slices.Collect(maps.Keys(s.available)), s.allocatable)
	default:
		// Any sandbox the machine lets it take: which one is the broker's choice.
		legal, allocated = out.Reason == "" && s.allocatable(out.SandboxID), out.SandboxID
	}
	if !legal {
		return false, s
	}
	return true, s.answered(in.CommandID, out, h, allocated)
}

// allocatable reports whether the sandbox machine lets an allocation take
// sandbox id in this state.
func (s poolState) allocatable(id string) bool {
	state, known := machine.SandboxAllocated, id != ""
	if s.available[id] {
		state = machine.SandboxAvailable
	}
	item := machine.Item{"status": &types.AttributeValueMemberS{Value: state}}
	allocate := machine.Sandbox.Transition(machine.SandboxAllocate)
	return known && machine.Sandbox.Decide(allocate, item, item, machine.SandboxInput{}).Applies()
}

// model is porcupine's view of sp from a pool of sandboxIDs.
func (sp spec) model(sandboxIDs []string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return newPoolState(sandboxIDs) },
		Step: func(state, input, output any) (bool, any) {
			return sp(state.(poolState), input.(allocInput), output.(allocOutput))
		},
		Equal: func(a, b any) bool { return a.(poolState).equal(b.(poolState)) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(allocInput), output.(allocOutput)
			answer := cmp.Or(out.Reason, short(out.SandboxID))
			return fmt.Sprintf("%s %s/%s #%s → %s", in.Type, in.TrackID, in.holder().key, short(in.CommandID), answer)
		},
		DescribeState: func(state any) string { return state.(poolState).String() },
	}
}

func short(id string) string { return id[:min(8, len(id))] }

// invocation is one delivery of a command, stamped before it was sent.
type invocation struct {
	in input
	at time.Time
}

// sighting is an event as the test's tap saw it, stamped after the
// receive that returned it.
type sighting struct {
	ev service.TapEvent
	at time.Time
}

// inputOf is what a run's command asks, for the commands a specification
// reads: sandbox.allocate and task.lease.
func inputOf(c command) (input, bool) {
	switch p := c.Payload.(type) {
	case messages.SandboxAllocatePayload:
		return allocInput{Type: c.Type, TrackID: p.TrackID, Key: p.IdempotencyKey, CommandID: c.ID}, true
	case messages.TaskLeasePayload:
		return leaseInput{CommandID: c.ID, AgentID: p.AgentID}, true
	}
	return nil, false
}

// operations turns deliveries and sightings into porcupine's history.
// A delivery's answer is the first event of its command the tap saw after
// the delivery was sent: its own, or an earlier delivery's, which the
// specification holds to be the same answer. Either way the interval
// holds the moment the broker decided (a send comes before it, an event
// after it), so a correct broker's history always passes.
func operations(invs []invocation, seen []sighting) ([]porcupine.Operation, error) {
	if len(invs) == 0 {
		return nil, nil
	}
	byCommand := map[string][]sighting{}
	for _, s := range seen {
		byCommand[s.ev.Envelope.CausationID] = append(byCommand[s.ev.Envelope.CausationID], s)
	}
	epoch := slices.MinFunc(invs, func(a, b invocation) int { return a.at.Compare(b.at) }).at
	var ops []porcupine.Operation
	for _, inv := range invs {
		id := inv.in.commandID()
		i := slices.IndexFunc(byCommand[id], func(s sighting) bool { return !s.at.Before(inv.at) })
		if i < 0 {
			return nil, fmt.Errorf("%+v (command %s) sent at %s: no event seen after it", inv.in, id, inv.at.Format(time.RFC3339Nano))
		}
		answer := byCommand[id][i]
		out, err := inv.in.answer(answer.ev)
		if err != nil {
			return nil, err
		}
		ops = append(ops, porcupine.Operation{
			Input: inv.in, Output: out, Metadata: id,
			Call: inv.at.Sub(epoch).Nanoseconds(), Return: answer.at.Sub(epoch).Nanoseconds(),
		})
	}
	assignClients(ops)
	return ops, nil
}

// outputOf reads an answer from an event; an event of another kind is an
// answer no specification accepts.
func outputOf(ev service.TapEvent) (allocOutput, error) {
	switch ev.Envelope.Type {
	case messages.SandboxAllocated:
		var p messages.SandboxAllocatedPayload
		err := json.Unmarshal(ev.Envelope.Payload, &p)
		return allocOutput{SandboxID: p.SandboxID}, err
	case messages.SandboxAllocationRejected:
		var p messages.SandboxAllocationRejectedPayload
		err := json.Unmarshal(ev.Envelope.Payload, &p)
		return allocOutput{Reason: p.Reason}, err
	default:
		return allocOutput{Reason: "event " + string(ev.Envelope.Type)}, nil
	}
}

// assignClients gives operations that do not overlap the same client:
// porcupine's visualisation draws a row per client.
func assignClients(ops []porcupine.Operation) {
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	var rowEnds []int64
	for _, i := range order {
		row := slices.IndexFunc(rowEnds, func(end int64) bool { return end < ops[i].Call })
		if row < 0 {
			row = len(rowEnds)
			rowEnds = append(rowEnds, 0)
		}
		rowEnds[row] = ops[i].Return
		ops[i].ClientId = row
	}
}

// checkTimeout bounds one check. A correct history is ordered in well
// under a second (1,500 operations: 0.4 s), but proving a wrong one wrong
// may mean trying every subset of the rejections that overlap, which can
// outlast any test; a check cut short answers Unknown, which fails the
// test too.
const checkTimeout = 30 * time.Second

// checked is a check's verdict with what its visualisation needs.
type checked struct {
	result porcupine.CheckResult
	info   porcupine.LinearizationInfo
	model  porcupine.Model
	took   time.Duration
}

func checkHistory(m porcupine.Model, ops []porcupine.Operation) checked {
	began := time.Now()
	result, info := porcupine.CheckOperationsVerbose(m, ops, checkTimeout)
	return checked{result: result, info: info, model: m, took: time.Since(began)}
}

// assertLinearizable fails the test unless ops are linearizable against
// the broker's specification (assertLinearizableTo).
func assertLinearizable(t *testing.T, sandboxIDs []string, ops []porcupine.Operation) {
	t.Helper()
	assertLinearizableTo(t, fmt.Sprintf("allocations from a pool of %d", len(sandboxIDs)), spec(allocateSpec).model(sandboxIDs), ops, conflicts)
}

// assertLinearizableTo fails the test unless ops (what describes them)
// are linearizable against model m. On failure it logs the answers conflicts finds contradicting
// each other, and writes porcupine's visualisation (the longest orders
// found, and the operations none of them could place) to a file named
// after the test and names the file.
func assertLinearizableTo(t *testing.T, what string, m porcupine.Model, ops []porcupine.Operation, conflicts func([]porcupine.Operation) []string) {
	t.Helper()
	c := checkHistory(m, ops)
	t.Logf("linearizability: %d operations, %s: %s in %s", len(ops), what, c.result, c.took.Round(10*time.Microsecond))
	if c.result == porcupine.Ok {
		return
	}
	if found := conflicts(ops); len(found) > 0 {
		t.Logf("answers no order reconciles, found without porcupine (%d):\n  %s", len(found), strings.Join(found, "\n  "))
	}
	path := filepath.Join(os.TempDir(), "transit-linearizability", strings.ReplaceAll(t.Name(), "/", "_")+".html")
	if err := writeVisualisation(c, path); err != nil {
		t.Errorf("history %s; visualisation not written: %v", c.result, err)
		return
	}
	verdict := "not linearizable"
	if c.result == porcupine.Unknown {
		verdict = fmt.Sprintf("not known to be linearizable: the check was cut short after %s", checkTimeout)
	}
	t.Errorf("history %s; porcupine's visualisation: %s", verdict, path)
}

// conflicts lists the answers that contradict each other whatever the
// order, as long as nothing is released (true of every history here): a
// command answered twice differently, a holder given two answers, a
// sandbox given to two holders. Porcupine's verdict does not depend on
// them; they name the culprits in a CI log, also when porcupine ran out
// of time.
func conflicts(ops []porcupine.Operation) []string {
	answers := func(key func(allocInput, allocOutput) (string, string)) map[string][]string {
		seen := map[string][]string{}
		for _, op := range ops {
			k, v := key(op.Input.(allocInput), op.Output.(allocOutput))
			if k != "" && !slices.Contains(seen[k], v) {
				seen[k] = append(seen[k], v)
			}
		}
		return seen
	}
	var found []string
	report := func(what string, seen map[string][]string) {
		for k, vs := range seen {
			if len(vs) > 1 {
				found = append(found, fmt.Sprintf("%s %s: %s", what, k, strings.Join(vs, ", ")))
			}
		}
	}
	report("command answered", answers(func(in allocInput, out allocOutput) (string, string) {
		return in.CommandID, cmp.Or(out.SandboxID, out.Reason)
	}))
	report("holder answered", answers(func(in allocInput, out allocOutput) (string, string) {
		return in.holder().track + "/" + in.holder().key, cmp.Or(out.SandboxID, out.Reason)
	}))
	report("sandbox given to", answers(func(in allocInput, out allocOutput) (string, string) {
		return out.SandboxID, in.holder().track + "/" + in.holder().key
	}))
	slices.Sort(found)
	return found
}

func writeVisualisation(c checked, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(c.model, c.info, path)
}

// race sends every command at once, each from its own goroutine as
// separate producers would, waits until each has caused an event and
// returns the history and the events.
func (s *stack) race(cmds []allocInput) ([]porcupine.Operation, []service.TapEvent) {
	s.t.Helper()
	invs := make([]invocation, len(cmds))
	var wg sync.WaitGroup
	for i, in := range cmds {
		wg.Go(func() {
			invs[i] = invocation{in: in, at: time.Now()}
			s.send(in.CommandID, in.Type, messages.SandboxAllocatePayload{TrackID: in.TrackID, IdempotencyKey: in.Key})
		})
	}
	wg.Wait()
	// collect calls its condition after every receive: a new event is
	// stamped then, no earlier than the tap saw it.
	var seen []sighting
	events := s.collect(120*time.Second, func(evs []service.TapEvent) bool {
		now := time.Now()
		for _, ev := range evs[len(seen):] {
			seen = append(seen, sighting{ev: ev, at: now})
		}
		return !slices.ContainsFunc(cmds, func(in allocInput) bool { return len(causedBy(evs, in.CommandID)) == 0 })
	})
	ops, err := operations(invs, seen)
	require.NoError(s.t, err)
	return ops, events
}

// assertLinearizable checks the fault run's history: every delivery the
// producer sent and the events the tap saw.
func (r *faultRun) assertLinearizable() {
	r.s.t.Helper()
	ops, err := operations(r.sent, r.events.sightings())
	require.NoError(r.s.t, err)
	assertLinearizable(r.s.t, r.pool, ops)
}

// neverTheLastSandbox is the specification with one guard flipped: the
// last available sandbox cannot be allocated.
func neverTheLastSandbox(s poolState, in allocInput, out allocOutput) (bool, poolState) {
	if _, decided := s.outcomes[in.CommandID]; !decided && len(s.available) == 1 && s.available[out.SandboxID] {
		return false, s
	}
	return allocateSpec(s, in, out)
}

// TestLinearizability_specification holds the specification to each of
// its rules on small histories written by hand: a broken rule lets an
// illegal history pass or fails a legal one.
func TestLinearizability_specification(t *testing.T) {
	pool := []string{"sbx-a", "sbx-b"}
	alloc := func(track, key, id string) allocInput {
		return allocInput{Type: messages.SandboxAllocate, TrackID: track, Key: key, CommandID: id}
	}
	got := func(sb string) allocOutput { return allocOutput{SandboxID: sb} }
	exhausted := allocOutput{Reason: messages.ReasonPoolExhausted}
	op := func(in allocInput, out allocOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"concurrent allocations take different sandboxes", []porcupine.Operation{
			op(alloc("t1", "", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t2", "", "c2"), got("sbx-b"), 0, 10),
		}, porcupine.Ok},
		{"one sandbox given to two holders", []porcupine.Operation{
			op(alloc("t1", "", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t2", "", "c2"), got("sbx-a"), 0, 10),
		}, porcupine.Illegal},
		{"a sandbox not in the pool", []porcupine.Operation{
			op(alloc("t1", "", "c1"), got("sbx-z"), 0, 10),
		}, porcupine.Illegal},
		{"pool exhausted once both are taken, while they are taken", []porcupine.Operation{
			op(alloc("t1", "", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t2", "", "c2"), got("sbx-b"), 0, 10),
			op(alloc("t3", "", "c3"), exhausted, 5, 15),
		}, porcupine.Ok},
		{"pool exhausted before anything was taken", []porcupine.Operation{
			op(alloc("t3", "", "c3"), exhausted, 0, 4),
			op(alloc("t1", "", "c1"), got("sbx-a"), 5, 10),
		}, porcupine.Illegal},
		{"a second command of the holder gets its sandbox", []porcupine.Operation{
			op(alloc("t1", "k", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t1", "k", "c2"), got("sbx-a"), 0, 10),
		}, porcupine.Ok},
		{"a second command of the holder gets another sandbox", []porcupine.Operation{
			op(alloc("t1", "k", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t1", "k", "c2"), got("sbx-b"), 0, 10),
		}, porcupine.Illegal},
		{"the key defaults to the track", []porcupine.Operation{
			op(alloc("t1", "", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t1", "t1", "c2"), got("sbx-b"), 20, 30),
		}, porcupine.Illegal},
		{"another key of the track is another holder", []porcupine.Operation{
			op(alloc("t1", "k1", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t1", "k2", "c2"), got("sbx-b"), 20, 30),
		}, porcupine.Ok},
		{"one holder answered a sandbox and pool exhausted", []porcupine.Operation{
			op(alloc("t2", "", "c0"), got("sbx-b"), 0, 10),
			op(alloc("t1", "k", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t1", "k", "c2"), exhausted, 0, 10),
		}, porcupine.Illegal},
		{"a redelivery gets the first answer after the pool ran out", []porcupine.Operation{
			op(alloc("t3", "", "c3"), exhausted, 20, 30),
			op(alloc("t1", "", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t2", "", "c2"), got("sbx-b"), 0, 10),
			op(alloc("t1", "", "c1"), got("sbx-a"), 20, 30),
		}, porcupine.Ok},
		{"a redelivery answered anew", []porcupine.Operation{
			op(alloc("t1", "", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t1", "", "c1"), got("sbx-b"), 20, 30),
		}, porcupine.Illegal},
		{"a rejection redelivered answered with a sandbox", []porcupine.Operation{
			op(alloc("t1", "", "c1"), got("sbx-a"), 0, 10),
			op(alloc("t2", "", "c2"), got("sbx-b"), 0, 10),
			op(alloc("t3", "", "c3"), exhausted, 20, 30),
			op(alloc("t3", "", "c3"), got("sbx-a"), 40, 50),
		}, porcupine.Illegal},
		{"an answer of another kind", []porcupine.Operation{
			op(alloc("t1", "", "c1"), allocOutput{Reason: "event sandbox.synced"}, 0, 10),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, checkHistory(spec(allocateSpec).model(pool), c.ops).result)
		})
	}
}

// TestLinearizability_operations: an operation spans its delivery's send
// to the first event of its command seen after it, so a late redelivery is
// answered by the event it caused and not by one seen before it was sent.
func TestLinearizability_operations(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cmd := uuid.NewString()
	in := allocInput{Type: messages.SandboxAllocate, TrackID: "t1", CommandID: cmd}
	allocated := func(sb string) service.TapEvent {
		payload, err := json.Marshal(messages.SandboxAllocatedPayload{SandboxID: sb, TrackID: "t1"})
		require.NoError(t, err)
		return service.TapEvent{Envelope: messages.Envelope{Type: messages.SandboxAllocated, CausationID: cmd, Payload: payload}}
	}
	ops, err := operations(
		[]invocation{{in: in, at: at(0)}, {in: in, at: at(1)}, {in: in, at: at(50)}},
		[]sighting{{ev: allocated("sbx-a"), at: at(20)}, {ev: allocated("sbx-a"), at: at(21)}, {ev: allocated("sbx-a"), at: at(70)}})
	require.NoError(t, err)
	require.Len(t, ops, 3)
	assert.Equal(t, []int64{0, 20}, []int64{ops[0].Call, ops[0].Return / int64(time.Millisecond)})
	assert.Equal(t, int64(20), ops[1].Return/int64(time.Millisecond), "the first event after the second send")
	assert.Equal(t, int64(70), ops[2].Return/int64(time.Millisecond), "not the events before the late send")
	assert.Equal(t, allocOutput{SandboxID: "sbx-a"}, ops[2].Output)
	assert.NotEqual(t, ops[0].ClientId, ops[1].ClientId, "overlapping operations on separate rows")
	assert.Equal(t, ops[0].ClientId, ops[2].ClientId, "the late one reuses a free row")

	_, err = operations([]invocation{{in: in, at: at(80)}}, []sighting{{ev: allocated("sbx-a"), at: at(70)}})
	assert.ErrorContains(t, err, "no event seen after it", "a delivery without an answer is reported, not dropped")
}

// assertBrokenSpecRejects checks ops against the specification with one
// guard flipped, which a history that allocated the whole pool fails.
func assertBrokenSpecRejects(t *testing.T, sandboxIDs []string, ops []porcupine.Operation) {
	assertRejects(t, "a specification that never allocates the last sandbox rejects the history", spec(neverTheLastSandbox).model(sandboxIDs), ops)
}

// assertRejects checks ops against broken, a specification with one rule
// changed that the history must fail: a check that passed it would not be
// reading the history. Its visualisation is written too, as a failing
// check writes it.
func assertRejects(t *testing.T, name string, broken porcupine.Model, ops []porcupine.Operation) {
	t.Run(name, func(t *testing.T) {
		require.NotEmpty(t, ops)
		c := checkHistory(broken, ops)
		t.Logf("%d operations: %s in %s", len(ops), c.result, c.took.Round(10*time.Microsecond))
		assert.Equal(t, porcupine.Illegal, c.result)
		path := filepath.Join(t.TempDir(), "history.html")
		require.NoError(t, writeVisualisation(c, path))
		html, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Contains(t, string(html), short(ops[0].Input.(input).commandID()), "the visualisation shows the operations")
	})
}

// TestLinearizability_conflicts: what a failed check logs names the
// holder answered twice and the sandbox given twice.
func TestLinearizability_conflicts(t *testing.T) {
	op := func(track, key, id string, out allocOutput) porcupine.Operation {
		return porcupine.Operation{Input: allocInput{Type: messages.SandboxAllocate, TrackID: track, Key: key, CommandID: id}, Output: out}
	}
	assert.Equal(t, []string{
		"holder answered t1/k: sbx-a, sbx-b",
		"sandbox given to sbx-c: t2/t2, t3/t3",
	}, conflicts([]porcupine.Operation{
		op("t1", "k", "c1", allocOutput{SandboxID: "sbx-a"}),
		op("t1", "k", "c2", allocOutput{SandboxID: "sbx-b"}),
		op("t2", "", "c3", allocOutput{SandboxID: "sbx-c"}),
		op("t3", "", "c4", allocOutput{SandboxID: "sbx-c"}),
		op("t4", "", "c5", allocOutput{Reason: messages.ReasonPoolExhausted}),
		op("t4", "", "c5", allocOutput{Reason: messages.ReasonPoolExhausted}),
	}))
}
