package service

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"transit/machine"
	"transit/messages"
	"transit/store"
)

// TraceNode is one command's recorded outcome in a correlation, with the
// commands it caused.
type TraceNode struct {
	store.AuditRecord
	// Events are the events the outcome reports, as its state machine
	// declares them; empty where the declaration leaves it open (see
	// emittedBy).
	Events []messages.Type `json:"events,omitempty"`
	Caused []*TraceNode    `json:"caused,omitempty"`
}

// Trace is a correlation's causal chain, read from the recorded outcomes.
type Trace struct {
	CorrelationID string `json:"correlation_id"`
	// Roots are the outcomes caused by nothing in the chain (usually one:
	// the command that started it), oldest first.
	Roots []*TraceNode `json:"roots"`
	// Truncated is true when the chain has more outcomes than were read.
	Truncated bool `json:"truncated,omitempty"`
}

// tracePage is how many outcomes one read of a correlation takes.
const tracePage = 100

// Trace reads the outcomes of correlationID, at most limit of them, and
// hangs each under the outcome of its cause: the command that sent it, or
// the one whose event caused it. An outcome whose cause is not in the
// chain hangs under the first root.
func (s *Service) Trace(ctx context.Context, correlationID string, limit int) (Trace, error) {
	tr := Trace{CorrelationID: correlationID}
	var records []store.AuditRecord
	cursor := ""
	for {
		page, err := s.Store.Correlation(ctx, correlationID, tracePage, cursor)
		if err != nil {
			return Trace{}, fmt.Errorf("trace %s: %w", correlationID, err)
		}
		records = append(records, page.Items...)
		if len(records) >= limit {
			tr.Truncated = len(records) > limit || page.Next != ""
			records = records[:limit]
			break
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	// The root read by its ID comes first; the time orders it like the rest.
	slices.SortStableFunc(records, func(a, b store.AuditRecord) int { return strings.Compare(a.At, b.At) })
	nodes := make([]*TraceNode, len(records))
	byID := map[string]*TraceNode{}
	// An event's ID derives from its command's, so a command an event
	// caused is found under the command that emitted it.
	byEvent := map[string]*TraceNode{}
	for i, r := range records {
		n := &TraceNode{AuditRecord: r, Events: emittedBy(r)}
		nodes[i], byID[r.CommandID] = n, n
		for _, e := range n.Events {
			byEvent[messages.DerivedID(r.CommandID, e, "")] = n
		}
	}
	var orphans []*TraceNode
	for _, n := range nodes {
		cause := byID[n.CausationID]
		if cause == nil {
			cause = byEvent[n.CausationID]
		}
		switch {
		case cause != nil && cause != n:
			cause.Caused = append(cause.Caused, n)
		case n.CausationID == "":
			tr.Roots = append(tr.Roots, n)
		default:
			orphans = append(orphans, n)
		}
	}
	if len(tr.Roots) == 0 {
		tr.Roots, orphans = orphans, nil
	}
	if len(orphans) > 0 {
		tr.Roots[0].Caused = append(tr.Roots[0].Caused, orphans...)
		slices.SortStableFunc(tr.Roots[0].Caused, func(a, b *TraceNode) int { return strings.Compare(a.At, b.At) })
	}
	return tr, nil
}

// WriteText prints the trace as an indented tree: each outcome's time,
// command type, entity and outcome, the events it reported, and under it
// the commands it caused.
func (t Trace) WriteText(w io.Writer) error {
	var b strings.Builder
	var write func(n *TraceNode, depth int)
	write = func(n *TraceNode, depth int) {
		indent := strings.Repeat("  ", depth)
		outcome := n.Status
		switch {
		case n.Status == store.Rejected:
			outcome += ": " + n.Reason
		case n.Reason != "":
			outcome += " (" + n.Reason + ")"
		}
		fmt.Fprintf(&b, "%s%s  %s  %s  %s\n", indent, n.At, n.Action, n.Entity, outcome)
		for _, e := range n.Events {
			fmt.Fprintf(&b, "%s  → %s\n", indent, e)
		}
		for _, c := range n.Caused {
			write(c, depth+1)
		}
	}
	for _, r := range t.Roots {
		write(r, 0)
	}
	if t.Truncated {
		b.WriteString("… more outcomes than were read (--max)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// emitted is what one command type's transitions declare they emit,
// applied and rejected.
type emitted struct{ applied, rejected []messages.Type }

// declaredEvents gathers, per command type, the events every state
// machine's transitions declare (machine.Transition Event and Rejected).
var declaredEvents = func() map[messages.Type]*emitted {
	out := map[messages.Type]*emitted{}
	for _, m := range machine.All {
		for _, t := range m.Emissions() {
			e := out[t.Command]
			if e == nil {
				e = &emitted{}
				out[t.Command] = e
			}
			if t.Event != "" && !slices.Contains(e.applied, t.Event) {
				e.applied = append(e.applied, t.Event)
			}
			if t.Rejected != "" && !slices.Contains(e.rejected, t.Rejected) {
				e.rejected = append(e.rejected, t.Rejected)
			}
		}
	}
	return out
}()

// emittedBy is the event an outcome reported, when its command's state
// machines declare exactly one for such an outcome. An applied outcome
// with a reason (a timer firing's retry, a lease that found nothing) took
// a transition the reason names, not necessarily the one with the event,
// and a command whose transitions emit different events (a cleanup:
// deleted, deletion-failed or cleanup-stuck) is not told apart; the
// outcome line says what happened there.
func emittedBy(r store.AuditRecord) []messages.Type {
	e := declaredEvents[messages.Type(r.Action)]
	switch {
	case e == nil:
		return nil
	case r.Status == store.Rejected && len(e.rejected) == 1:
		return e.rejected
	case r.Status == store.Applied && r.Reason == "" && len(e.applied) == 1:
		return e.applied
	}
	return nil
}
