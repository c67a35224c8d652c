package machine_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/machine"
)

// built is a condition or update as DynamoDB receives it.
type built struct {
	text   string
	names  []string
	values []string
}

func build(t *testing.T, cond *expression.ConditionBuilder, update *expression.UpdateBuilder) built {
	t.Helper()
	b := expression.NewBuilder()
	if cond != nil {
		b = b.WithCondition(*cond)
	}
	if update != nil {
		b = b.WithUpdate(*update)
	}
	expr, err := b.Build()
	require.NoError(t, err)
	out := built{}
	if cond != nil {
		out.text = *expr.Condition()
	} else {
		out.text = *expr.Update()
	}
	for _, n := range expr.Names() {
		out.names = append(out.names, n)
	}
	for _, v := range expr.Values() {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out.values = append(out.values, v.Value)
		case *types.AttributeValueMemberN:
			out.values = append(out.values, v.Value)
		}
	}
	sort.Strings(out.names)
	sort.Strings(out.values)
	return out
}

// TestCondition_names_and_values_go_through_placeholders: the state, every
// guard's attribute and value, nothing of the input spliced into the text.
func TestCondition_names_and_values_go_through_placeholders(t *testing.T) {
	read := sandboxIn(t, machine.SandboxAllocated)
	in := input()
	in.TrackID = `t" OR #status = :available) --`
	cond := machine.Sandbox.Condition(machine.Sandbox.Transition(machine.SandboxMarkDeletion), in, read)
	got := build(t, &cond, nil)
	assert.Equal(t, []string{"allocated_at", "allocated_to_track", "lab_duration_hours", "status"}, got.names)
	assert.Contains(t, got.values, in.TrackID)
	assert.Contains(t, got.values, machine.SandboxAllocated)
	assert.Contains(t, got.values, "1799985600", "the window opens lab duration before now")
	assert.NotContains(t, got.text, "OR", "the track is a value, not syntax")
	assert.Equal(t, 4, strings.Count(got.text, "AND")+1, "state and three guards")
}

func TestCondition_of_a_creation_requires_no_item(t *testing.T) {
	cond := machine.Sandbox.Condition(machine.Sandbox.Transition(machine.SandboxAdd), input(), nil)
	got := build(t, &cond, nil)
	assert.Equal(t, []string{"PK"}, got.names)
	assert.Contains(t, got.text, "attribute_not_exists")
}

func TestCondition_of_several_starting_states_is_one_IN(t *testing.T) {
	cond := machine.Sandbox.Condition(machine.Sandbox.Transition(machine.SandboxMarkStale), input(), sandboxIn(t, machine.SandboxAvailable))
	got := build(t, &cond, nil)
	assert.Contains(t, got.text, " IN (")
	assert.Equal(t, []string{machine.SandboxAllocated, machine.SandboxAvailable}, got.values)
}

func TestUpdate_sets_the_state_and_every_assignment(t *testing.T) {
	update := machine.Sandbox.Update(machine.Sandbox.Transition(machine.SandboxAllocate), input(), sandboxIn(t, machine.SandboxAvailable))
	got := build(t, nil, &update)
	assert.Equal(t, []string{"allocated_at", "allocated_to_track", "idempotency_key", "status", "updated_at"}, got.names)
	assert.Contains(t, got.values, machine.SandboxAllocated)
	assert.Contains(t, got.values, track)
}

// TestMermaid_draws_every_transition_from_every_starting_state, naming
// the guards that reject.
func TestMermaid_draws_every_transition_from_every_starting_state(t *testing.T) {
	diagram := machine.Sandbox.Mermaid()
	require.True(t, strings.HasPrefix(diagram, "stateDiagram-v2\n"))
	arrows := strings.Count(diagram, "-->")
	want := 0
	for _, tr := range machine.Sandbox.Transitions {
		want += len(tr.From)
	}
	assert.Equal(t, want, arrows)
	assert.Contains(t, diagram, "allocated --> pending_deletion: sandbox.mark-deletion, its track releases it (owner else not_owner, window open else expired)")
	assert.Contains(t, diagram, "[*] --> available: sandbox.sync")
	assert.Contains(t, diagram, "pending_deletion --> [*]: sandbox.cleanup")
	assert.NotContains(t, diagram, "lab duration unchanged", "pins reject nothing, so they are not drawn")
}

// cell is one (transition × state) cell of a machine's table: the next
// state when the transition applies, else the reason it is refused.
type cell struct{ to, reason string }

// checkTable decides every cell of m's table on the item itemIn gives for
// each state (nil for Absent) and input in, and checks it against table,
// which must list every transition and state: the next state and the
// transition's event, or the reason and its rejection event.
func checkTable[In any](t *testing.T, m *machine.Machine[In], table map[string]map[string]cell, itemIn func(*testing.T, string) machine.Item, in In) {
	t.Helper()
	require.Len(t, table, len(m.Transitions), "%s: every transition has its row", m.Name)
	for _, tr := range m.Transitions {
		for _, state := range append([]string{machine.Absent}, m.States...) {
			want, listed := table[tr.Name][state]
			require.True(t, listed, "cell %s %s × %q is in the table", m.Name, tr.Name, state)
			t.Run(m.Name+"/"+tr.Name+"/from_"+state, func(t *testing.T) {
				item := itemIn(t, state)
				out := m.Decide(m.Transition(tr.Name), item, item, in)
				assert.False(t, out.Stale)
				if want.reason != "" {
					assert.Equal(t, want.reason, out.Reason)
					assert.Nil(t, out.Next)
					assert.Equal(t, tr.Rejected, out.Event)
					return
				}
				require.True(t, out.Applies(), "rejected: %s", out.Reason)
				assert.Equal(t, tr.Event, out.Event)
				switch want.to {
				case machine.Absent:
					assert.Nil(t, out.Next)
				case m.Unset:
					require.NotNil(t, out.Next)
					assert.NotContains(t, out.Next, m.State, "an item in %s has no %s", want.to, m.State)
				default:
					assert.Equal(t, want.to, str(t, out.Next, m.State))
				}
			})
		}
	}
}
