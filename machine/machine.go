// Package machine declares each domain's state machine once, as data, and
// derives from that one declaration everything that must agree with it:
// the pure Decide the tests use as their model, the condition and update
// expressions of the DynamoDB write, the rejection reason when DynamoDB
// refuses the write (from the item it returns), and the state diagram in
// the domain's documentation.
//
// A machine works on one item, seen as DynamoDB sees it: a map of
// attribute values. Its state is one attribute (status, say); each
// transition names the states it may start from, its guards in the order
// their reasons take precedence, the state it leads to and the attributes
// it sets. A guard compares one attribute with a value computed from the
// command's input and the item as read; Decide evaluates the comparison
// in Go, Condition hands the same comparison to DynamoDB.
package machine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"transit/messages"
)

// Item is one DynamoDB item: attribute name to value. A nil Item is an
// item that does not exist.
type Item = map[string]types.AttributeValue

// Absent is the state of an item that does not exist: a transition from
// it creates the item, a transition to it deletes the item.
const Absent = ""

// Deleted is the state the snapshot of an item reports once a transition
// has deleted it; no stored item is ever in it.
const Deleted = "deleted"

// Same as a transition's next state keeps the state the item is in: one
// transition for a change several states allow alike (a task's progress).
const Same = "(same)"

// Op is how a guard compares an attribute with its value.
type Op int

// The comparisons DynamoDB conditions offer that guards use.
const (
	Eq Op = iota
	Lt
	Le
	Gt
	Ge
	// Ne: the attribute differs from Value (with OrAbsent, or is absent).
	Ne
	Exists
	NotExists
	// OneOf: the attribute is one of the strings Value gives ([]string).
	OneOf
	// Contains: the attribute, a list or a string set, holds the string
	// Value gives.
	Contains
)

// Guard is one condition a transition needs besides its starting state.
type Guard[In any] struct {
	// Name says what the guard stands for in diagrams and tests ("owner").
	Name string
	// Reason is the rejection reason when the guard fails. Empty marks a
	// pin: a value the transition read and relies on not having changed.
	// A failed pin is no rejection: the item changed under the write, so
	// it is read and decided again.
	Reason string
	Attr   string
	Op     Op
	// Value is what Attr is compared with, from the command's input and
	// the item as read; unused by Exists and NotExists. For Eq, a nil
	// value means the attribute must be absent (a pin on an attribute
	// the item was read without).
	Value func(in In, read Item) any
	// OrAbsent makes the guard hold also when the item lacks Attr: a
	// deadline never set is no deadline.
	OrAbsent bool
}

// Assign sets one attribute of the next state; a Value of nil leaves the
// attribute as it is (an optional field the command left out).
type Assign[In any] struct {
	Attr  string
	Value func(in In, read Item) any
}

// Transition is one way a command moves an item.
type Transition[In any] struct {
	// Name identifies the transition; a command whose outcome depends on
	// something outside DynamoDB (a provider's answer) has one per outcome.
	Name string
	// Command is the command that takes it, and Doc says when, for the
	// state diagram.
	Command messages.Type
	Doc     string
	// From lists the states it may start from; Absent creates the item.
	From   []string
	Guards []Guard[In]
	// To is the next state; Absent deletes the item.
	To     string
	Set    []Assign[In]
	Remove []string
	// Event is the event type the transition emits; Rejected, when set,
	// the one a rejection emits.
	Event    messages.Type
	Rejected messages.Type
	// Refuse gives the reason for starting states the transition does
	// not take where wrong_state would say too little (is_latest, say);
	// under Absent, the reason for an item that does not exist where
	// not_found would (org_not_found, say).
	Refuse map[string]string
}

// Machine is one domain's state machine over the items of one table.
type Machine[In any] struct {
	Name string
	// State is the attribute that holds the state; Key an attribute every
	// existing item has (a key attribute).
	State, Key string
	// Unset names the state of an item that exists without the State
	// attribute (a sparse index's key, say); empty when every item has it.
	Unset       string
	States      []string
	Transitions []Transition[In]
}

// Emission is what one transition declares: the command that takes it,
// the event it emits and the event of its refusal.
type Emission struct{ Command, Event, Rejected messages.Type }

// Emissions lists what m's transitions declare, in order.
func (m *Machine[In]) Emissions() []Emission {
	out := make([]Emission, len(m.Transitions))
	for i, t := range m.Transitions {
		out[i] = Emission{Command: t.Command, Event: t.Event, Rejected: t.Rejected}
	}
	return out
}

// Declared is a state machine of any input, as the docs draw it and
// `transit trace` reads its events.
type Declared interface {
	Mermaid() string
	Emissions() []Emission
}

// All is every state machine transit declares, by name.
var All = map[string]Declared{
	Sandbox.Name: Sandbox,
	Layer.Name:   Layer, Build.Name: Build, LayerPointer.Name: LayerPointer, BuildPointer.Name: BuildPointer,
	Timer.Name: Timer, Shard.Name: Shard,
	Org.Name: Org, User.Name: User, EmailClaim.Name: EmailClaim, Project.Name: Project, Settings.Name: Settings,
	Secret.Name: Secret, Task.Name: Task, TaskClaim.Name: TaskClaim, Queue.Name: Queue, Agent.Name: Agent,
	Notification.Name: Notification,
	Account.Name:      Account, Schedule.Name: Schedule, Resource.Name: Resource,
}

// Transition returns the transition named name; it panics on a name the
// machine does not declare, a programming error.
func (m *Machine[In]) Transition(name string) *Transition[In] {
	for i := range m.Transitions {
		if m.Transitions[i].Name == name {
			return &m.Transitions[i]
		}
	}
	panic(fmt.Sprintf("machine %s: no transition %q", m.Name, name))
}

// Outcome is what Decide says of a command on an item.
type Outcome struct {
	// Reason is the rejection reason; empty when the transition applies.
	Reason string
	// Stale is true when only a pin failed: the item changed since it was
	// read, so the decision must be made again on a fresh read.
	Stale bool
	// Next is the item after the transition (nil when it deletes it).
	Next Item
	// Event is the event emitted: the transition's, or its rejection's.
	Event messages.Type
}

// Applies reports whether the transition applies.
func (o Outcome) Applies() bool { return o.Reason == "" && !o.Stale }

// Decide is the pure model of transition t on item, read as read (the
// snapshot the input's values were computed from; item itself when the
// decision is made on the item as it is). The order of the checks is the
// order of precedence of the reasons: absence (not_found), state
// (wrong_state), then each guard.
func (m *Machine[In]) Decide(t *Transition[In], item, read Item, in In) Outcome {
	if item == nil && !slices.Contains(t.From, Absent) {
		reason := t.Refuse[Absent]
		if reason == "" {
			reason = messages.ReasonNotFound
		}
		return Outcome{Reason: reason, Event: t.Rejected}
	}
	if state := m.stateOf(item); !slices.Contains(t.From, state) {
		reason := t.Refuse[state]
		if reason == "" {
			reason = messages.ReasonWrongState
		}
		return Outcome{Reason: reason, Event: t.Rejected}
	}
	for _, g := range t.Guards {
		if holds(g, item, in, read) {
			continue
		}
		if g.Reason == "" {
			return Outcome{Stale: true}
		}
		return Outcome{Reason: g.Reason, Event: t.Rejected}
	}
	return Outcome{Next: m.next(t, item, in, read), Event: t.Event}
}

func (m *Machine[In]) stateOf(item Item) string {
	if item == nil {
		return Absent
	}
	if s, ok := item[m.State].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return m.Unset
}

// Checks reports whether t is a check: it changes nothing, neither an
// attribute nor the state, and is written as a condition check in the
// transaction of another change (a shard held at a version, a user
// allowed to act).
func (t *Transition[In]) Checks() bool {
	if len(t.Set) > 0 || len(t.Remove) > 0 {
		return false
	}
	return t.To == Same || !slices.ContainsFunc(t.From, func(s string) bool { return s != t.To })
}

func (m *Machine[In]) next(t *Transition[In], item Item, in In, read Item) Item {
	if t.Checks() {
		return item
	}
	if t.To == Absent {
		return nil
	}
	next := make(Item, len(item)+len(t.Set)+1)
	// A transition that may create its item writes it whole (a put),
	// replacing whatever was there; any other changes the item it finds.
	if !slices.Contains(t.From, Absent) {
		for k, v := range item {
			next[k] = v
		}
	}
	switch t.To {
	case Same:
	case m.Unset:
		delete(next, m.State)
	default:
		next[m.State] = &types.AttributeValueMemberS{Value: t.To}
	}
	for _, a := range t.Set {
		if v := a.Value(in, read); v != nil {
			next[a.Attr] = marshal(v)
		}
	}
	for _, attr := range t.Remove {
		delete(next, attr)
	}
	return next
}

// Created is the item a transition that may create its item writes
// whole (a put), whatever the item it replaces.
func (m *Machine[In]) Created(t *Transition[In], in In, read Item) Item {
	return m.next(t, nil, in, read)
}

// Condition is the DynamoDB condition of transition t: the item exists
// (or not, for a creation), is in one of t's starting states, and every
// guard holds, each with its value computed from in and read.
func (m *Machine[In]) Condition(t *Transition[In], in In, read Item) expression.ConditionBuilder {
	var conds []expression.ConditionBuilder
	var states []string
	for _, s := range t.From {
		switch s {
		case Absent:
			conds = append(conds, expression.AttributeNotExists(expression.Name(m.Key)))
		case m.Unset:
			conds = append(conds, expression.AttributeExists(expression.Name(m.Key)).
				And(expression.AttributeNotExists(expression.Name(m.State))))
		default:
			states = append(states, s)
		}
	}
	if len(states) > 0 {
		inState := expression.Name(m.State).Equal(expression.Value(states[0]))
		if len(states) > 1 {
			operands := make([]expression.OperandBuilder, len(states)-1)
			for i, s := range states[1:] {
				operands[i] = expression.Value(s)
			}
			inState = expression.Name(m.State).In(expression.Value(states[0]), operands...)
		}
		conds = append(conds, inState)
	}
	cond := conds[0]
	if len(conds) > 1 {
		// A creation that may also overwrite an item in a given state.
		cond = expression.Or(conds[0], conds[1], conds[2:]...)
	}
	for _, g := range t.Guards {
		cond = cond.And(guardCondition(g, in, read))
	}
	return cond
}

// Guards is the condition of t's guards alone: a query's filter, where
// the query's key already selects t's starting state.
func (m *Machine[In]) Guards(t *Transition[In], in In, read Item) expression.ConditionBuilder {
	cond := guardCondition(t.Guards[0], in, read)
	for _, g := range t.Guards[1:] {
		cond = cond.And(guardCondition(g, in, read))
	}
	return cond
}

func guardCondition[In any](g Guard[In], in In, read Item) expression.ConditionBuilder {
	name := expression.Name(g.Attr)
	switch g.Op {
	case Exists:
		return expression.AttributeExists(name)
	case NotExists:
		return expression.AttributeNotExists(name)
	}
	value := g.Value(in, read)
	if g.Op == Eq && value == nil {
		return expression.AttributeNotExists(name)
	}
	v := expression.Value(value)
	var cond expression.ConditionBuilder
	switch g.Op {
	case OneOf:
		values := value.([]string)
		operands := make([]expression.OperandBuilder, len(values)-1)
		for i, s := range values[1:] {
			operands[i] = expression.Value(s)
		}
		cond = name.In(expression.Value(values[0]), operands...)
	case Contains:
		cond = expression.Contains(name, value.(string))
	case Lt:
		cond = name.LessThan(v)
	case Le:
		cond = name.LessThanEqual(v)
	case Gt:
		cond = name.GreaterThan(v)
	case Ge:
		cond = name.GreaterThanEqual(v)
	case Ne:
		cond = name.NotEqual(v)
	default:
		cond = name.Equal(v)
	}
	if g.OrAbsent {
		cond = expression.AttributeNotExists(name).Or(cond)
	}
	return cond
}

// Update is the DynamoDB update of transition t (one that does not delete
// its item): the new state and every assignment.
func (m *Machine[In]) Update(t *Transition[In], in In, read Item) expression.UpdateBuilder {
	var update expression.UpdateBuilder
	switch t.To {
	case Same:
	case m.Unset:
		update = update.Remove(expression.Name(m.State))
	default:
		update = update.Set(expression.Name(m.State), expression.Value(t.To))
	}
	for _, a := range t.Set {
		if v := a.Value(in, read); v != nil {
			update = update.Set(expression.Name(a.Attr), expression.Value(v))
		}
	}
	for _, attr := range t.Remove {
		update = update.Remove(expression.Name(attr))
	}
	return update
}

// holds evaluates a guard as DynamoDB evaluates its condition: a
// comparison with a missing attribute, or across types, is false.
func holds[In any](g Guard[In], item Item, in In, read Item) bool {
	got, ok := item[g.Attr]
	switch g.Op {
	case Exists:
		return ok
	case NotExists:
		return !ok
	}
	value := g.Value(in, read)
	if g.Op == Eq && value == nil {
		return !ok
	}
	if !ok {
		return g.OrAbsent
	}
	switch g.Op {
	case OneOf:
		s, isString := got.(*types.AttributeValueMemberS)
		return isString && slices.Contains(value.([]string), s.Value)
	case Contains:
		return contains(got, value.(string))
	}
	c, comparable := compare(got, marshal(value))
	if !comparable {
		// Values of different types are unequal, and unordered.
		return g.Op == Ne
	}
	switch g.Op {
	case Lt:
		return c < 0
	case Le:
		return c <= 0
	case Gt:
		return c > 0
	case Ge:
		return c >= 0
	case Ne:
		return c != 0
	default:
		return c == 0
	}
}

func marshal(v any) types.AttributeValue {
	av, err := attributevalue.Marshal(v)
	if err != nil {
		// Guard and assignment values are strings and numbers of the
		// declaration's own making.
		panic(fmt.Sprintf("machine: cannot marshal %T: %v", v, err))
	}
	return av
}

// Mermaid is the machine's state diagram in Mermaid's stateDiagram-v2
// syntax: one arrow per starting state of each transition, labelled with
// its command, when it is taken, and the guards whose failure rejects it.
func (m *Machine[In]) Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	node := func(state string) string {
		if state == Absent {
			return "[*]"
		}
		return state
	}
	for _, t := range m.Transitions {
		// A transition no command takes (a shard claim) has its Doc alone.
		label := strings.TrimPrefix(string(t.Command)+", "+t.Doc, ", ")
		label = strings.TrimSuffix(label, ", ")
		var guards []string
		for _, g := range t.Guards {
			if g.Reason != "" {
				guards = append(guards, g.Name+" else "+g.Reason)
			}
		}
		if len(guards) > 0 {
			label += " (" + strings.Join(guards, ", ") + ")"
		}
		for _, from := range t.From {
			to := t.To
			if to == Same {
				to = from
			}
			fmt.Fprintf(&b, "    %s --> %s: %s\n", node(from), node(to), label)
		}
	}
	return b.String()
}

// readNumber is the number attr had when the item was read, exactly as
// stored (0 when it had none), for pins.
func readNumber(read Item, attr string) any {
	if n, ok := read[attr].(*types.AttributeValueMemberN); ok {
		return attributevalue.Number(n.Value)
	}
	return attributevalue.Number("0")
}
