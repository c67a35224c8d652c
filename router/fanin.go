package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/trace"

	"transit/messages"
	"transit/store"
	"transit/streams"
	"transit/tracing"
	"transit/transport"
)

// StreamRule turns a DynamoDB stream record into a command: records of
// Table of kind Event whose key attributes start with KeyPrefixes become a
// Command whose payload fields are copied from the item's image (the old
// image for a removal, the new one otherwise).
type StreamRule struct {
	// Table is the table's name before the stack prefix, e.g. "Layers".
	Table string `json:"table"`
	// Event is dynamodb.insert, dynamodb.modify or dynamodb.remove.
	Event string `json:"event"`
	// KeyPrefixes maps key attributes to the prefix their value must have.
	KeyPrefixes map[string]string `json:"key_prefixes"`
	// TTLOnly restricts a removal rule to removals by TTL expiry.
	TTLOnly bool `json:"ttl_only,omitempty"`
	// Command is the command sent to its domain's queue.
	Command messages.Type `json:"command"`
	// Fields maps the command's payload fields to image attributes.
	Fields map[string]string `json:"fields"`
}

// LayerRemovedRule is the layers domain's rule (docs/fanin.md): a layer
// version item removed by DynamoDB's TTL (its retention over, or
// layer.delete-requested) deletes its Lambda layer version. An item a
// client deletes (a repair, a restore) takes nothing from Lambda.
var LayerRemovedRule = StreamRule{
	Table:       store.Layers.Name,
	Event:       streams.TypeRemove,
	KeyPrefixes: map[string]string{"pk": "lyr#", "sk": "lyrVrsn#v"},
	TTLOnly:     true,
	Command:     messages.LayerRemoved,
	Fields:      map[string]string{"region": "rgn", "package": "pckg", "version": "vrsn", "arn": "arn"},
}

// LayerRemovedOnAnyRemove is LayerRemovedRule firing on every removal of a
// layer version item (TRANSIT_LAYER_DELETE_ON_ANY_REMOVE): emulators never
// expire TTL items nor mark a removal as TTL's, so tests and the demo play
// a TTL removal by deleting the item.
func LayerRemovedOnAnyRemove() StreamRule {
	r := LayerRemovedRule
	r.TTLOnly = false
	return r
}

// ParseStreamRules reads extra rules (a JSON array of StreamRule) and
// checks each names a streamed table, an event kind and a command.
func ParseStreamRules(raw string) ([]StreamRule, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var rules []StreamRule
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("not a JSON array of rules: %w", err)
	}
	var errs []error
	for i, r := range rules {
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("rule %d: %w", i, err))
		}
	}
	return rules, errors.Join(errs...)
}

func (r StreamRule) validate() error {
	var errs []error
	if t, ok := streamedTable(r.Table); !ok {
		errs = append(errs, fmt.Errorf("table %q is not a streamed table of transit", r.Table))
	} else {
		for attr := range r.KeyPrefixes {
			if attr != t.PartitionKey.Name && attr != t.SortKey.Name {
				errs = append(errs, fmt.Errorf("%q is not a key attribute of %s", attr, r.Table))
			}
		}
	}
	switch r.Event {
	case streams.TypeInsert, streams.TypeModify, streams.TypeRemove:
	default:
		errs = append(errs, fmt.Errorf("event %q, want %s, %s or %s", r.Event, streams.TypeInsert, streams.TypeModify, streams.TypeRemove))
	}
	if r.TTLOnly && r.Event != streams.TypeRemove {
		errs = append(errs, errors.New("ttl_only applies to removals only"))
	}
	if !messages.IsCommand(r.Command) {
		errs = append(errs, fmt.Errorf("command %q is not a command type", r.Command))
	}
	if len(r.Fields) == 0 {
		errs = append(errs, errors.New("fields: at least one payload field"))
	}
	return errors.Join(errs...)
}

func streamedTable(name string) (store.Table, bool) {
	for _, t := range store.Tables {
		if t.Name == name && t.Stream != "" {
			return t, true
		}
	}
	return store.Table{}, false
}

// match reports whether rec is one the rule turns into a command.
func (r StreamRule) match(rec streams.Record) bool {
	if rec.Type != r.Event || (r.TTLOnly && !rec.TTLRemoval) {
		return false
	}
	for attr, prefix := range r.KeyPrefixes {
		v, ok := rec.Keys[attr].(string)
		if !ok || !strings.HasPrefix(v, prefix) {
			return false
		}
	}
	return true
}

// command builds the rule's command for rec. Its ID derives from the
// record's event ID, so a record read again (after a restart before its
// checkpoint) sends the same command, which the audit table deduplicates.
func (r StreamRule) command(rec streams.Record) (*message.Message, error) {
	image := rec.NewImage
	if rec.Type == streams.TypeRemove {
		image = rec.OldImage
	}
	payload := make(map[string]any, len(r.Fields))
	for field, attr := range r.Fields {
		if v, ok := image[attr]; ok {
			payload[field] = v
		}
	}
	id := messages.DerivedID(rec.EventID, r.Command, "")
	return transport.NewCommand(id, r.Command, payload, rec.ApproximateCreationTime)
}

// RegisterFanIn adds a handler turning the stream of one table (table is
// its full name, logical its name before the prefix) into the commands of
// the rules about it. The commands are validated where they are handled,
// so a rule that copies the wrong fields dead-letters its commands there,
// with the reason.
func RegisterFanIn(r *message.Router, table, logical string, sub message.Subscriber, pub message.Publisher, rules []StreamRule, log *slog.Logger) {
	var mine []StreamRule
	for _, rule := range rules {
		if rule.Table == logical {
			mine = append(mine, rule)
		}
	}
	r.AddHandler("fan-in-"+logical, table, sub, transport.ByType, loggedPublisher{pub, log}, func(msg *message.Message) ([]*message.Message, error) {
		// The delivery's span (router.New), a root one since a record
		// carries no trace context, is a stream record's; the commands
		// produced publish as its children.
		trace.SpanFromContext(msg.Context()).SetAttributes(tracing.DynamoDBStreams)
		var rec streams.Record
		dec := json.NewDecoder(bytes.NewReader(msg.Payload))
		dec.UseNumber() // keep every digit of DynamoDB numbers
		if err := dec.Decode(&rec); err != nil {
			// A record the stream subscriber wrote and cannot be read back is
			// a bug: retrying cannot help, and holding the shard would stop it.
			deliveryLogger(msg.Context(), log).Error("stream record not decodable; skipped", "error", err)
			return nil, nil
		}
		var out []*message.Message
		for _, rule := range mine {
			if !rule.match(rec) {
				continue
			}
			cmd, err := rule.command(rec)
			if err != nil {
				return nil, fmt.Errorf("stream record %s to %s: %w", rec.EventID, rule.Command, err)
			}
			out = append(out, cmd)
		}
		return out, nil
	})
}

// StreamedTables lists the tables some rule reads.
func StreamedTables(rules []StreamRule) []store.Table {
	var ts []store.Table
	seen := map[string]bool{}
	for _, r := range rules {
		if t, ok := streamedTable(r.Table); ok && !seen[t.Name] {
			seen[t.Name] = true
			ts = append(ts, t)
		}
	}
	return ts
}
