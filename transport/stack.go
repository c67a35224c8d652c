package transport

import (
	"transit/messages"
)

// Stack names every queue and topic of one transit stack. Names come from
// the message catalogue (messages.CommandQueue and friends) behind the
// stack's prefix, so several stacks can share an account.
type Stack struct {
	Prefix string
}

func (s Stack) name(base string) string { return s.Prefix + "-" + base }

// CommandQueue is the SQS queue a domain's handler consumes.
func (s Stack) CommandQueue(d messages.Domain) string { return s.name(messages.CommandQueue(d)) }

// DeadLetterQueue receives a domain's poison commands and, through the
// queue's redrive policy, commands whose retries ran out.
func (s Stack) DeadLetterQueue(d messages.Domain) string { return s.name(messages.DeadLetterQueue(d)) }

// CommandTopic is the SNS topic producers may publish commands to; it is
// subscribed by the command queue with raw delivery.
func (s Stack) CommandTopic(d messages.Domain) string { return s.name(messages.CommandTopic(d)) }

// EventTopic is the SNS topic a domain's events are published to.
func (s Stack) EventTopic(d messages.Domain) string { return s.name(messages.EventTopic(d)) }

// Queues lists every SQS queue of the stack.
func (s Stack) Queues() []string {
	var qs []string
	for _, d := range messages.Domains() {
		qs = append(qs, s.CommandQueue(d), s.DeadLetterQueue(d))
	}
	return qs
}

// Topics lists every SNS topic of the stack.
func (s Stack) Topics() []string {
	var ts []string
	for _, d := range messages.Domains() {
		ts = append(ts, s.CommandTopic(d), s.EventTopic(d))
	}
	return ts
}

// destination resolves where a message of type t goes: a command to its
// domain's queue, an event to its domain's topic.
func (s Stack) destination(t messages.Type, command bool) (name string, isTopic bool, ok bool) {
	d, ok := messages.DomainOf(t)
	switch {
	case !ok:
		return "", false, false
	case command && messages.IsCommand(t):
		return s.CommandQueue(d), false, true
	case !command && messages.IsEvent(t):
		return s.EventTopic(d), true, true
	}
	return "", false, false
}
