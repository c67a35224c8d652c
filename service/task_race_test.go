package service_test

// Races of task.lease (docs/tasks.md): twenty agents lease from a hundred
// queued tasks through two transit processes (one in the test, one the
// real binary), and again with every lease delivered three times while
// the binary is killed with SIGKILL and restarted. Each run ends with
// every task leased exactly once, to the agent its answer names, and its
// history (every delivery sent, every answer seen: faultkit_test.go) is
// checked with porcupine (linearizability_test.go) against the lease as
// the documentation states it: a lease takes the org's most urgent queued
// task the agent may take (highest priority, then oldest), answers
// task.lease-empty only when there is none, and a command delivered again
// gets its first answer (TestTaskRace_specification holds that
// specification to each rule on histories written by hand).
//
// An answer published again must be the first one byte for byte
// (docs/delivery.md), occurred_at included:
// TestTaskRace_a_lease_delivered_again_is_the_same_event.
//
// These tests race DynamoDB transactions: they are not moto-safe
// (harness_test.go) and run on DynamoDB Local.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/machine"
	"transit/messages"
	"transit/service"
	"transit/store"
)

const (
	raceTasks  = 100
	raceAgents = 20
	// raceLeases is six leases an agent: a hundred answered with a task,
	// twenty with task.lease-empty.
	raceLeases = 120
	// raceLease outlasts any run: no lease expires and requeues its task.
	raceLease = 10 * time.Minute
)

// reservedFor are the tasks queued first, at priority 100, each reserved
// for one agent (desired_agent_id): the most urgent task for that agent
// and for no other, so its agent's first lease must take it.
var reservedFor = map[string]string{"t-r01": "agent-01", "t-r05": "agent-05", "t-r09": "agent-09", "t-r13": "agent-13"}

// taskAnswers are the events that answer the commands of a task race.
var taskAnswers = map[messages.Type][]messages.Type{
	messages.TaskQueue: {messages.TaskQueued},
	messages.TaskLease: {messages.TaskLeased, messages.TaskLeaseEmpty},
}

func raceConfig(c *config.Config) {
	faultConfig(c)
	c.TaskLease = raceLease
}

// startRaceTransit runs `transit serve` as a subprocess, configured as
// raceConfig configures the one in the test.
func (s *stack) startRaceTransit(t *testing.T) *transitProc {
	return s.startTransit(t, "TRANSIT_TASK_LEASE="+raceLease.String())
}

// leaseInput is what one delivery of a task.lease asked.
type leaseInput struct {
	CommandID string
	AgentID   string
}

// leaseOutput is what it was answered: a task leased to an agent, or
// task.lease-empty; any other event is an answer no specification accepts.
type leaseOutput struct {
	Event   messages.Type
	TaskID  string
	AgentID string
}

func (in leaseInput) commandID() string { return in.CommandID }

func (in leaseInput) answer(ev service.TapEvent) (any, error) { return leaseOutputOf(ev) }

func leaseOutputOf(ev service.TapEvent) (leaseOutput, error) {
	out := leaseOutput{Event: ev.Envelope.Type}
	var err error
	switch ev.Envelope.Type {
	case messages.TaskLeased:
		var p messages.TaskLeasedPayload
		err = json.Unmarshal(ev.Envelope.Payload, &p)
		out.TaskID, out.AgentID = p.TaskID, p.AgentID
	case messages.TaskLeaseEmpty:
		var p messages.TaskLeaseEmptyPayload
		err = json.Unmarshal(ev.Envelope.Payload, &p)
		out.AgentID = p.AgentID
	}
	return out, err
}

// queuedTask is a task waiting for a lease, as its task.queued event
// announced it.
type queuedTask struct {
	ID             string
	Priority       int
	CreatedAt      string
	DesiredAgentID string
}

// taskQueue is an org's queue as the specification sees it: the tasks
// still queued, and the answer each lease command got first. Porcupine
// keeps states to backtrack to, so a step returns a changed copy.
type taskQueue struct {
	queued   map[string]queuedTask
	outcomes map[string]leaseOutput
}

// order ranks two queued tasks for a lease: negative when a goes first.
type order func(a, b queuedTask) int

// mostUrgentFirst is the documented order (docs/tasks.md, ready-index):
// higher priority first, then the older, and tasks created in the same
// millisecond by ID.
func mostUrgentFirst(a, b queuedTask) int {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), strings.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
}

// oldestFirst is a broken order, which leases by age alone.
func oldestFirst(a, b queuedTask) int {
	return cmp.Or(strings.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
}

// next is the task a lease by agent takes in order by: the first queued
// task that is unreserved or reserved for the agent.
func (q taskQueue) next(agent string, by order) (queuedTask, bool) {
	var best queuedTask
	found := false
	for _, task := range q.queued {
		if (task.DesiredAgentID == "" || task.DesiredAgentID == agent) && (!found || by(task, best) < 0) {
			best, found = task, true
		}
	}
	return best, found
}

// answered is q after command id was answered out, the task it names
// leased.
func (q taskQueue) answered(id string, out leaseOutput) taskQueue {
	next := taskQueue{queued: q.queued, outcomes: maps.Clone(q.outcomes)}
	next.outcomes[id] = out
	if out.TaskID != "" {
		next.queued = maps.Clone(q.queued)
		delete(next.queued, out.TaskID)
	}
	return next
}

func (q taskQueue) String() string {
	waiting := slices.SortedFunc(maps.Values(q.queued), mostUrgentFirst)
	var head []string
	for _, task := range waiting[:min(6, len(waiting))] {
		head = append(head, fmt.Sprintf("%s p%d %s", task.ID, task.Priority, task.CreatedAt))
	}
	return fmt.Sprintf("%d queued (most urgent: %s), %d answered", len(q.queued), strings.Join(head, ", "), len(q.outcomes))
}

// leaseSpec is a sequential specification of task.lease: whether out is
// a legal answer to in from state q, and the state after it.
type leaseSpec func(q taskQueue, in leaseInput, out leaseOutput) (bool, taskQueue)

// leasesBy is task.lease taking tasks in order by. It is written from the
// documentation, not from the machine's guards, so that it can catch the
// machine's mistakes. Every task is visible: the races queue them all
// (nextVisibleAt is their creation) before the first lease is sent, and
// nothing is requeued.
func leasesBy(by order) leaseSpec {
	return func(q taskQueue, in leaseInput, out leaseOutput) (bool, taskQueue) {
		if first, ok := q.outcomes[in.CommandID]; ok {
			// A delivery again gets the recorded answer, whatever the queue is now.
			return out == first, q
		}
		next, found := q.next(in.AgentID, by)
		switch {
		case out.AgentID != in.AgentID:
			return false, q
		case out.Event == messages.TaskLeaseEmpty && !found:
		case out.Event == messages.TaskLeased && found && out.TaskID == next.ID:
		default:
			return false, q
		}
		return true, q.answered(in.CommandID, out)
	}
}

// model is porcupine's view of sp from the queued tasks.
func (sp leaseSpec) model(tasks []queuedTask) porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			q := taskQueue{queued: map[string]queuedTask{}, outcomes: map[string]leaseOutput{}}
			for _, task := range tasks {
				q.queued[task.ID] = task
			}
			return q
		},
		Step: func(state, input, output any) (bool, any) {
			return sp(state.(taskQueue), input.(leaseInput), output.(leaseOutput))
		},
		Equal: func(a, b any) bool {
			x, y := a.(taskQueue), b.(taskQueue)
			return maps.Equal(x.queued, y.queued) && maps.Equal(x.outcomes, y.outcomes)
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(leaseInput), output.(leaseOutput)
			return fmt.Sprintf("lease %s #%s → %s", in.AgentID, short(in.CommandID), cmp.Or(out.TaskID, string(out.Event)))
		},
		DescribeState: func(state any) string { return state.(taskQueue).String() },
	}
}

// leaseConflicts lists the answers that contradict each other whatever
// the order (nothing is requeued in these runs): a command answered
// twice differently, a task leased to two commands.
func leaseConflicts(ops []porcupine.Operation) []string {
	answers, takers := map[string][]string{}, map[string][]string{}
	for _, op := range ops {
		in, out := op.Input.(leaseInput), op.Output.(leaseOutput)
		answer := fmt.Sprintf("%s %s to %s", out.Event, out.TaskID, out.AgentID)
		if !slices.Contains(answers[in.CommandID], answer) {
			answers[in.CommandID] = append(answers[in.CommandID], answer)
		}
		if out.TaskID != "" && !slices.Contains(takers[out.TaskID], in.CommandID) {
			takers[out.TaskID] = append(takers[out.TaskID], in.CommandID)
		}
	}
	var found []string
	for id, as := range answers {
		if len(as) > 1 {
			found = append(found, fmt.Sprintf("command answered %s: %s", id, strings.Join(as, ", ")))
		}
	}
	for task, ids := range takers {
		if len(ids) > 1 {
			found = append(found, fmt.Sprintf("task leased to %s: %s", task, strings.Join(ids, ", ")))
		}
	}
	slices.Sort(found)
	return found
}

// assertLeasesLinearizable checks the run's history of leases from the
// queued tasks against the specification.
func (r *faultRun) assertLeasesLinearizable(tasks []queuedTask) []porcupine.Operation {
	r.s.t.Helper()
	ops, err := operations(r.sent, r.events.sightings())
	require.NoError(r.s.t, err)
	took := make([]time.Duration, len(ops))
	for i, op := range ops {
		took[i] = time.Duration(op.Return - op.Call)
	}
	slices.Sort(took)
	r.s.t.Logf("a delivery's answer seen after: median %s, 90th percentile %s, longest %s (visibility timeout %s)", took[len(took)/2].Round(time.Millisecond),
		took[len(took)*9/10].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), r.s.cfg.VisibilityTimeout)
	assertLinearizableTo(r.s.t, fmt.Sprintf("leases from a queue of %d tasks", len(tasks)), leasesBy(mostUrgentFirst).model(tasks), ops, leaseConflicts)
	return ops
}

// raceTaskCommands are the task.queued commands of a race: the reserved
// tasks, then the others, priorities 0 to 100 in steps of ten, about nine
// of each, the oldest at priority 0.
func raceTaskCommands() (reserved, others []command) {
	queue := func(id string, priority int, agent string) command {
		return command{ID: uuid.NewString(), Type: messages.TaskQueue, Payload: messages.TaskQueuePayload{OrgID: "acme", TaskID: id,
			ProjectID: "web", Prompt: "Task " + id, Priority: &priority, DesiredAgentID: agent, Actor: "user:u-dev"}}
	}
	for _, id := range slices.Sorted(maps.Keys(reservedFor)) {
		reserved = append(reserved, queue(id, 100, reservedFor[id]))
	}
	for i := range raceTasks - len(reservedFor) {
		others = append(others, queue(fmt.Sprintf("t-%03d", i), i*7%11*10, ""))
	}
	return reserved, others
}

// queueRaceTasks seeds the org and queues the race's tasks through the
// run, the reserved ones first, waiting for every task.queued; it returns
// the tasks as their events announced them.
func (r *faultRun) queueRaceTasks() []queuedTask {
	s := r.s
	s.t.Helper()
	reserved, others := raceTaskCommands()
	r.drive(reserved, 2*time.Minute, nil)
	r.drive(others, 2*time.Minute, nil)
	ids := map[string]bool{}
	for _, c := range append(reserved, others...) {
		ids[c.ID] = true
	}
	var tasks []queuedTask
	for _, ev := range r.events.seen() {
		if ev.Envelope.Type != messages.TaskQueued || !ids[ev.Envelope.CausationID] {
			continue
		}
		delete(ids, ev.Envelope.CausationID)
		p := payloadOf[messages.TaskQueuedPayload](s.t, ev)
		tasks = append(tasks, queuedTask{ID: p.TaskID, Priority: p.Priority, CreatedAt: p.CreatedAt, DesiredAgentID: p.DesiredAgentID})
	}
	require.Len(s.t, tasks, raceTasks, "every task queued")
	for _, task := range tasks {
		if agent := reservedFor[task.ID]; agent != "" {
			require.Equal(s.t, agent, task.DesiredAgentID)
			for _, other := range tasks {
				require.False(s.t, other.DesiredAgentID == "" && other.CreatedAt <= task.CreatedAt, "%s is not younger than the reserved %s", other.ID, task.ID)
			}
		}
	}
	return tasks
}

// raceLeaseCommands are n task.lease commands, from the agents in turn.
func raceLeaseCommands(n int) []command {
	cmds := make([]command, n)
	for i := range cmds {
		cmds[i] = command{ID: uuid.NewString(), Type: messages.TaskLease,
			Payload: messages.TaskLeasePayload{OrgID: "acme", AgentID: fmt.Sprintf("agent-%02d", i%raceAgents)}}
	}
	return cmds
}

// leaseTally is what a race ended with: the fault suite's counts, and
// how many answers were not the lease's (an event published again that
// differs from the first: docs/delivery.md has it the same message, byte
// for byte).
type leaseTally struct {
	tally
	leased, empty, restamped int
}

// checkLeases compares the stack's end state with what the leases must
// have done, logs the counts and asserts that nothing was lost or
// doubled.
//
// Lost: a lease command without its recorded outcome or its event, a
// task announced leased that the Tasks table does not show leased to the
// agent, a task no lease took. Doubled: a task announced to two
// commands, or in two LEASED entries of its history; a command answered
// with two events, or with an event that is not the replay of the first
// (another ID, type or payload: a fresh decision); an answer to another
// agent; a recorded outcome that is not the event's.
func (r *faultRun) checkLeases(evs []service.TapEvent, tasks []queuedTask, leases []command, deliveries int) leaseTally {
	s := r.s
	s.t.Helper()
	ctx := context.Background()
	audit := s.auditItems()
	table := map[string]map[string]any{}
	for _, item := range s.scan(store.Tasks) {
		if id, isTask := item["taskId"].(string); isTask { // not a task ID's claim
			table[id] = item
		}
	}
	queue := map[string]map[string]any{}
	for _, item := range s.scan(store.Queue) {
		queue[item["taskId"].(string)] = item
	}
	byCause := map[string][]service.TapEvent{}
	for _, e := range evs {
		byCause[e.Envelope.CausationID] = append(byCause[e.Envelope.CausationID], e)
	}
	var problems []string
	problem := func(kind *int, format string, args ...any) {
		*kind++
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	t := leaseTally{tally: tally{commands: len(leases)}}
	answeredEvery := 0
	takenBy := map[string]string{} // task ID → the command whose event leased it
	for _, c := range leases {
		agent := c.Payload.(messages.TaskLeasePayload).AgentID
		item, recorded := audit[c.ID]
		caused := byCause[c.ID]
		switch {
		case !recorded:
			problem(&t.lost, "%s: no recorded outcome", c.ID)
			continue
		case item.Status != store.Applied:
			problem(&t.lost, "%s: recorded %s (%s), not a lease", c.ID, item.Status, item.Reason)
			continue
		case len(caused) == 0:
			problem(&t.lost, "%s: applied but no event", c.ID)
			continue
		}
		t.applied++
		if len(caused) >= deliveries {
			answeredEvery++
		}
		t.reemitted += max(0, len(caused)-deliveries)
		first := caused[0]
		for _, e := range caused[1:] {
			switch {
			case e.MessageID != first.MessageID || e.Envelope.Type != first.Envelope.Type || string(e.Envelope.Payload) != string(first.Envelope.Payload):
				problem(&t.doubled, "%s: answered %s %s, then %s %s", c.ID, first.Envelope.Type, first.Envelope.Payload, e.Envelope.Type, e.Envelope.Payload)
			case !e.Envelope.OccurredAt.Equal(first.Envelope.OccurredAt):
				problem(&t.restamped, "%s: %s published again with occurred_at %s, first %s", c.ID, e.Envelope.Type,
					e.Envelope.OccurredAt.Format(time.RFC3339), first.Envelope.OccurredAt.Format(time.RFC3339))
			}
		}
		out, err := leaseOutputOf(first)
		require.NoError(s.t, err)
		if first.MessageID != messages.DerivedID(c.ID, first.Envelope.Type, "") {
			problem(&t.doubled, "%s: event ID %s does not derive from the command", c.ID, first.MessageID)
		}
		var rec store.Lease
		require.NoError(s.t, json.Unmarshal([]byte(cmp.Or(item.Details, "{}")), &rec), "recorded outcome of %s", c.ID)
		switch {
		case out.AgentID != agent:
			problem(&t.doubled, "%s: %s for agent %q, want %s", c.ID, out.Event, out.AgentID, agent)
		case out.Event == messages.TaskLeaseEmpty:
			t.empty++
			if rec.Task.TaskID != "" {
				problem(&t.doubled, "%s: answered %s, recorded a lease of %s", c.ID, out.Event, rec.Task.TaskID)
			}
		case out.Event != messages.TaskLeased:
			problem(&t.lost, "%s: answered %s", c.ID, out.Event)
		case takenBy[out.TaskID] != "":
			problem(&t.doubled, "%s: task %s was leased to %s too", c.ID, out.TaskID, takenBy[out.TaskID])
		case rec.Task.TaskID != out.TaskID:
			problem(&t.doubled, "%s: event leases %s, the recorded outcome %s", c.ID, out.TaskID, rec.Task.TaskID)
		case table[out.TaskID]["state"] != machine.TaskLeased || table[out.TaskID]["agentId"] != agent:
			problem(&t.lost, "%s: %s leased to %s, the Tasks table has it %v to %v", c.ID, out.TaskID, agent, table[out.TaskID]["state"], table[out.TaskID]["agentId"])
		case queue[out.TaskID]["leaseOwner"] != agent || queue[out.TaskID]["attempts"] != 1.0 || queue[out.TaskID]["readyKey"] != nil:
			problem(&t.doubled, "%s: %s leased to %s, its queue item is %v", c.ID, out.TaskID, agent, queue[out.TaskID])
		}
		if out.Event == messages.TaskLeased && takenBy[out.TaskID] == "" {
			t.leased++
			takenBy[out.TaskID] = c.ID
		}
	}
	for _, task := range tasks {
		if takenBy[task.ID] == "" {
			problem(&t.lost, "task %s (priority %d) was never leased: %v to %v", task.ID, task.Priority, table[task.ID]["state"], table[task.ID]["agentId"])
			continue
		}
		// One transition: the history has one LEASED, by the agent answered.
		events, _, err := s.svc.Store.TaskHistory(ctx, task.ID)
		require.NoError(s.t, err)
		var kinds []string
		for _, e := range events {
			kinds = append(kinds, e.Type)
		}
		if !slices.Equal(kinds, []string{"CREATED", "QUEUED", "LEASED"}) {
			problem(&t.doubled, "task %s: history %v", task.ID, kinds)
		} else if want := fmt.Sprintf("agent:%v", table[task.ID]["agentId"]); events[2].Actor != want {
			problem(&t.doubled, "task %s: LEASED by %s, the table says %s", task.ID, events[2].Actor, want)
		}
	}
	waiting, inFlight := s.queueDepth(s.url(s.svc.Stack.DeadLetterQueue(messages.Task)))
	t.deadLetters = waiting + inFlight

	s.t.Logf("fault %s: %s leased=%d empty=%d restamped=%d", r.name, t.tally, t.leased, t.empty, t.restamped)
	assert.Zero(s.t, t.lost, "lost: %s", strings.Join(problems, "; "))
	assert.Zero(s.t, t.doubled, "doubled: %s", strings.Join(problems, "; "))
	assert.Zero(s.t, t.deadLetters, "nothing dead-lettered")
	assert.Equal(s.t, len(leases), t.applied, "every lease answered")
	assert.Equal(s.t, len(leases), answeredEvery, "every delivery of every lease answered")
	assert.Equal(s.t, len(tasks), t.leased, "every task leased")
	assert.Equal(s.t, len(leases)-len(tasks), t.empty, "the leases left over answered task.lease-empty")
	assert.Zero(s.t, t.restamped, "an answer published again is the same message, byte for byte (docs/delivery.md): %s", strings.Join(problems, "; "))
	return t
}

// TestTaskRace_specification holds the lease's specification to each of
// its rules on small histories written by hand.
func TestTaskRace_specification(t *testing.T) {
	tasks := []queuedTask{
		{ID: "c", Priority: 50, CreatedAt: "2026-11-24T10:00:00.000Z"},
		{ID: "a", Priority: 50, CreatedAt: "2026-11-24T10:00:01.000Z"},
		{ID: "a2", Priority: 50, CreatedAt: "2026-11-24T10:00:01.000Z"},
		{ID: "b", Priority: 90, CreatedAt: "2026-11-24T10:00:02.000Z"},
		{ID: "r", Priority: 100, CreatedAt: "2026-11-24T10:00:03.000Z", DesiredAgentID: "agent-2"},
	}
	op := func(id, agent string, out leaseOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: leaseInput{CommandID: id, AgentID: agent}, Output: out, Call: call, Return: ret}
	}
	leased := func(task, agent string) leaseOutput {
		return leaseOutput{Event: messages.TaskLeased, TaskID: task, AgentID: agent}
	}
	empty := func(agent string) leaseOutput { return leaseOutput{Event: messages.TaskLeaseEmpty, AgentID: agent} }
	// in turn is agent-1 leasing the tasks given, one after the other.
	inTurn := func(answers ...leaseOutput) []porcupine.Operation {
		var ops []porcupine.Operation
		for i, out := range answers {
			ops = append(ops, op(fmt.Sprintf("l%d", i), "agent-1", out, int64(10*i), int64(10*i+5)))
		}
		return ops
	}
	cases := []struct {
		name string
		by   order
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"the most urgent first, then the oldest, then by ID", mostUrgentFirst,
			inTurn(leased("b", "agent-1"), leased("c", "agent-1"), leased("a", "agent-1"), leased("a2", "agent-1")), porcupine.Ok},
		{"of two created in the same millisecond, the greater ID first", mostUrgentFirst,
			inTurn(leased("b", "agent-1"), leased("c", "agent-1"), leased("a2", "agent-1")), porcupine.Illegal},
		{"an older task of the priority before a younger one", mostUrgentFirst,
			inTurn(leased("b", "agent-1"), leased("a", "agent-1")), porcupine.Illegal},
		{"a less urgent task while a more urgent one is queued", mostUrgentFirst,
			inTurn(leased("c", "agent-1")), porcupine.Illegal},
		{"two concurrent leases, either order", mostUrgentFirst, []porcupine.Operation{
			op("l1", "agent-1", leased("c", "agent-1"), 0, 10),
			op("l2", "agent-3", leased("b", "agent-3"), 0, 10),
		}, porcupine.Ok},
		{"a task leased twice", mostUrgentFirst, []porcupine.Operation{
			op("l1", "agent-1", leased("b", "agent-1"), 0, 10),
			op("l2", "agent-3", leased("b", "agent-3"), 0, 10),
		}, porcupine.Illegal},
		{"a task reserved for another agent", mostUrgentFirst,
			inTurn(leased("r", "agent-1")), porcupine.Illegal},
		{"the reserved task first for its agent", mostUrgentFirst, []porcupine.Operation{
			op("l1", "agent-2", leased("r", "agent-2"), 0, 5),
			op("l2", "agent-2", leased("b", "agent-2"), 10, 15),
		}, porcupine.Ok},
		{"its agent passing over the reserved task", mostUrgentFirst, []porcupine.Operation{
			op("l1", "agent-2", leased("b", "agent-2"), 0, 5),
		}, porcupine.Illegal},
		{"lease-empty while a task is queued", mostUrgentFirst,
			inTurn(empty("agent-1")), porcupine.Illegal},
		{"lease-empty when only another agent's task is left", mostUrgentFirst,
			inTurn(leased("b", "agent-1"), leased("c", "agent-1"), leased("a", "agent-1"), leased("a2", "agent-1"), empty("agent-1")), porcupine.Ok},
		{"a delivery again gets the first answer, whatever the queue is now", mostUrgentFirst, []porcupine.Operation{
			op("l1", "agent-1", leased("b", "agent-1"), 0, 5),
			op("l2", "agent-1", leased("c", "agent-1"), 10, 15),
			op("l1", "agent-1", leased("b", "agent-1"), 20, 25),
		}, porcupine.Ok},
		{"a delivery again answered anew", mostUrgentFirst, []porcupine.Operation{
			op("l1", "agent-1", leased("b", "agent-1"), 0, 5),
			op("l1", "agent-1", leased("c", "agent-1"), 10, 15),
		}, porcupine.Illegal},
		{"an answer to another agent", mostUrgentFirst,
			[]porcupine.Operation{op("l1", "agent-1", leased("b", "agent-3"), 0, 5)}, porcupine.Illegal},
		{"an answer of another kind", mostUrgentFirst,
			[]porcupine.Operation{op("l1", "agent-1", leaseOutput{Event: messages.TaskRejected, AgentID: "agent-1"}, 0, 5)}, porcupine.Illegal},
		{"the broken order: the oldest first", oldestFirst,
			inTurn(leased("c", "agent-1"), leased("a", "agent-1"), leased("a2", "agent-1"), leased("b", "agent-1")), porcupine.Ok},
		{"the broken order refuses the most urgent first", oldestFirst,
			inTurn(leased("b", "agent-1")), porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, checkHistory(leasesBy(c.by).model(tasks), c.ops).result)
		})
	}
	assert.Equal(t, []string{"command answered l1: task.leased b to agent-1, task.leased c to agent-1", "task leased to b: l1, l2"},
		leaseConflicts([]porcupine.Operation{
			op("l1", "agent-1", leased("b", "agent-1"), 0, 5),
			op("l1", "agent-1", leased("c", "agent-1"), 0, 5),
			op("l2", "agent-3", leased("b", "agent-3"), 0, 5),
		}))
}

// countingPublisher counts the events of the given types a process
// published.
type countingPublisher struct {
	message.Publisher
	types []messages.Type
	n     atomic.Int32
}

func (p *countingPublisher) Publish(topic string, msgs ...*message.Message) error {
	err := p.Publisher.Publish(topic, msgs...)
	if err == nil {
		for _, m := range msgs {
			if slices.Contains(p.types, messages.Type(m.Metadata.Get(messages.TypeAttribute))) {
				p.n.Add(1)
			}
		}
	}
	return err
}

// TestTaskRace_twenty_agents_two_processes: a hundred tasks queued (four
// reserved for one agent each), then 120 leases from twenty agents, sent
// as fast as the agents get their answers (twenty outstanding at a time),
// consumed by two transit processes at once. Every task is leased once,
// every lease answered, and the history is linearizable against the
// lease's specification; the specification with the oldest task first
// instead of the most urgent must reject it.
//
// Twenty outstanding rather than all 120 sent at once: leases that all
// overlap may be ordered any way, so a burst leaves porcupine little to
// check the order by (only the answers seen before the last sends); a
// lease sent after others were answered must take what they left.
func TestTaskRace_twenty_agents_two_processes(t *testing.T) {
	t.Parallel()
	s := newStack(t, raceConfig)
	inTest := &countingPublisher{types: []messages.Type{messages.TaskLeased, messages.TaskLeaseEmpty}}
	s.serve(service.ServeOptions{WrapPublisher: func(p message.Publisher) message.Publisher {
		inTest.Publisher = p
		return inTest
	}})
	s.startRaceTransit(t)
	s.org()
	r := s.newRun("task-race", messages.Task, taskAnswers)
	tasks := r.queueRaceTasks()

	leases := raceLeaseCommands(raceLeases)
	r.window = raceAgents
	began := time.Now()
	r.drive(leases, 2*time.Minute, nil)
	t.Logf("%d leases answered in %s", len(leases), time.Since(began).Round(time.Millisecond))
	evs := r.settle(time.Minute)
	got := r.checkLeases(evs, tasks, leases, 1)
	published := int(inTest.n.Load())
	t.Logf("answers published by the process in the test: %d of %d", published, got.applied)
	assert.Positive(t, published, "the process in the test answered leases")
	assert.Less(t, published, got.applied, "the subprocess answered leases")

	ops := r.assertLeasesLinearizable(tasks)
	assertRejects(t, "a specification that leases the oldest task first rejects the history", leasesBy(oldestFirst).model(tasks), ops)
}

// TestTaskRace_three_deliveries_and_kill9: the leases again, each
// delivered three times with the same ID (twice in a row, so that the
// copies race each other, and once more after all the others), while two
// processes consume them and the subprocess is killed with SIGKILL with a
// third of the leases answered and started again. Nothing is lost or
// leased twice, every delivery of a lease is answered with the same
// event, and the history is linearizable.
func TestTaskRace_three_deliveries_and_kill9(t *testing.T) {
	t.Parallel()
	s := newStack(t, raceConfig)
	s.serve(service.ServeOptions{})
	first := s.startRaceTransit(t)
	s.org()
	r := s.newRun("task-race-three-times-kill9", messages.Task, taskAnswers)
	tasks := r.queueRaceTasks()

	leases := raceLeaseCommands(raceLeases)
	var deliveries []command
	for _, c := range leases {
		deliveries = append(deliveries, c, c)
	}
	deliveries = append(deliveries, leases...)
	var second *transitProc
	began := time.Now()
	r.drive(deliveries, 2*time.Minute, func(done int) {
		if second != nil || done < len(leases)/3 {
			return
		}
		_, inFlight := s.queueDepth(r.queueURL)
		code, _ := first.stop(t, syscall.SIGKILL, 5*time.Second)
		require.Equal(t, -1, code, "killed by the signal")
		t.Logf("SIGKILL with %d of %d leases answered, %d messages in flight", done, len(leases), inFlight)
		second = s.startRaceTransit(t)
	})
	require.NotNil(t, second, "the fault was injected")
	t.Logf("%d deliveries of %d leases answered in %s", len(deliveries), len(leases), time.Since(began).Round(time.Millisecond))
	evs := r.settle(time.Minute)
	r.checkLeases(evs, tasks, leases, 3)
	ops := r.assertLeasesLinearizable(tasks)
	assertRejects(t, "a specification that leases the oldest task first rejects the history", leasesBy(oldestFirst).model(tasks), ops)
}

// TestTaskRace_a_lease_delivered_again_is_the_same_event: a lease
// delivered again after its answer was published, by a consumer whose
// clock is a minute on, is answered with the first event byte for byte:
// docs/delivery.md has a replay carry the recorded time, so that a
// re-emitted event is the same message. Both answers are tried, a task
// leased and task.lease-empty.
func TestTaskRace_a_lease_delivered_again_is_the_same_event(t *testing.T) {
	s := newStack(t, raceConfig)
	s.serve(service.ServeOptions{})
	s.org()
	s.apply(messages.TaskQueue, messages.TaskQueuePayload{OrgID: "acme", TaskID: "t-1", ProjectID: "web", Prompt: "p", Actor: "user:u-dev"}, messages.TaskQueued)
	for _, want := range []messages.Type{messages.TaskLeased, messages.TaskLeaseEmpty} {
		id := uuid.NewString()
		lease := messages.TaskLeasePayload{OrgID: "acme", AgentID: "agent-1"}
		s.clock.Shift(0)
		s.send(id, messages.TaskLease, lease)
		first := s.eventFor(id, want)
		s.clock.Shift(time.Minute)
		s.send(id, messages.TaskLease, lease)
		again := causedBy(s.collect(time.Minute, func(evs []service.TapEvent) bool { return len(causedBy(evs, id)) == 2 }), id)[1]
		assert.Equal(t, first.MessageID, again.MessageID, "%s: the same event ID", want)
		assert.Equal(t, string(first.Envelope.Payload), string(again.Envelope.Payload), "%s: the recorded answer", want)
		assert.Equal(t, first.Envelope.OccurredAt.Format(time.RFC3339), again.Envelope.OccurredAt.Format(time.RFC3339),
			"%s: a replay carries the recorded time, not the redelivery's", want)
	}
}
