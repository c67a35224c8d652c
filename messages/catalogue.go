package messages

import (
	"fmt"
	"sort"
)

// Type names a command or an event on the wire, e.g. "sandbox.allocate".
// It is an identifier: renaming one breaks every producer that sends it.
type Type string

// Domain groups the types that share a command queue and an event topic.
type Domain string

type spec struct {
	domain Domain
	new    func() any
}

// A command may share its name with the event that reports it
// (layer.published): the two live on different channels, so each kind has
// its own catalogue.
var (
	commands = map[Type]spec{}
	events   = map[Type]spec{}
)

func command[T any](domain Domain, t Type) Type {
	register(commands, t, spec{domain: domain, new: func() any { return new(T) }})
	return t
}

func event[T any](domain Domain, t Type) Type {
	register(events, t, spec{domain: domain, new: func() any { return new(T) }})
	return t
}

func register(catalogue map[Type]spec, t Type, s spec) {
	if _, dup := catalogue[t]; dup {
		panic(fmt.Sprintf("messages: type %q registered twice", t))
	}
	catalogue[t] = s
}

// DomainOf returns the domain of a registered type.
func DomainOf(t Type) (Domain, bool) {
	if s, ok := commands[t]; ok {
		return s.domain, true
	}
	s, ok := events[t]
	return s.domain, ok
}

// IsCommand reports whether t is a registered command type.
func IsCommand(t Type) bool {
	_, ok := commands[t]
	return ok
}

// IsEvent reports whether t is a registered event type.
func IsEvent(t Type) bool {
	_, ok := events[t]
	return ok
}

// NewCommandPayload returns a pointer to a zero payload of command t.
func NewCommandPayload(t Type) (any, bool) {
	s, ok := commands[t]
	if !ok {
		return nil, false
	}
	return s.new(), true
}

// Commands lists the command types of a domain, sorted.
func Commands(d Domain) []Type { return typesOf(commands, d) }

// Events lists the event types of a domain, sorted.
func Events(d Domain) []Type { return typesOf(events, d) }

// typesOf lists the types of catalogue in domain d (every domain when d
// is empty), sorted.
func typesOf(catalogue map[Type]spec, d Domain) []Type {
	var ts []Type
	for t, s := range catalogue {
		if d == "" || s.domain == d {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

// Domains lists every domain that has types, sorted.
func Domains() []Domain {
	seen := map[Domain]bool{}
	var ds []Domain
	for _, catalogue := range []map[Type]spec{commands, events} {
		for _, s := range catalogue {
			if !seen[s.domain] {
				seen[s.domain] = true
				ds = append(ds, s.domain)
			}
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

// CommandQueue is the name, before the stack prefix, of a domain's command queue.
func CommandQueue(d Domain) string { return string(d) + "-commands" }

// DeadLetterQueue is the name, before the stack prefix, of a domain's DLQ.
func DeadLetterQueue(d Domain) string { return string(d) + "-commands-dlq" }

// CommandTopic is the SNS topic producers may publish a domain's commands to;
// it feeds the command queue.
func CommandTopic(d Domain) string { return string(d) + "-commands" }

// EventTopic is the name, before the stack prefix, of a domain's event topic.
func EventTopic(d Domain) string { return string(d) + "-events" }
