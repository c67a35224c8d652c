package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"transit/messages"
)

// eventPayloads gives each event type's payload type; the catalogue builds
// payloads for commands only. An event added to the catalogue without an
// entry here fails TestDocs_examples_match_the_payload_types.
var eventPayloads = map[messages.Type]func() any{
	messages.SandboxAllocated:          func() any { return new(messages.SandboxAllocatedPayload) },
	messages.SandboxAllocationRejected: func() any { return new(messages.SandboxAllocationRejectedPayload) },
	messages.SandboxDeletionMarked:     func() any { return new(messages.SandboxDeletionMarkedPayload) },
	messages.SandboxDeletionRejected:   func() any { return new(messages.SandboxDeletionRejectedPayload) },
	messages.SandboxExpired:            func() any { return new(messages.SandboxExpiredPayload) },
	messages.SandboxDeleted:            func() any { return new(messages.SandboxDeletedPayload) },
	messages.SandboxDeletionFailed:     func() any { return new(messages.SandboxDeletionFailedPayload) },
	messages.SandboxSynced:             func() any { return new(messages.SandboxSyncedPayload) },
	messages.SandboxCleanupStuck:       func() any { return new(messages.SandboxCleanupStuckPayload) },
	messages.SandboxReinstated:         func() any { return new(messages.SandboxReinstatedPayload) },
	messages.SandboxReinstateRejected:  func() any { return new(messages.SandboxRejectedPayload) },
	messages.SandboxRetired:            func() any { return new(messages.SandboxRetiredPayload) },
	messages.SandboxRetireRejected:     func() any { return new(messages.SandboxRejectedPayload) },
	messages.LayerPublishedEvent:       func() any { return new(messages.LayerPublishedEventPayload) },
	messages.LayerPublishRejected:      func() any { return new(messages.LayerRejectedPayload) },
	messages.BuildRecordedEvent:        func() any { return new(messages.BuildRecordedEventPayload) },
	messages.BuildRecordRejected:       func() any { return new(messages.LayerRejectedPayload) },
	messages.LayerDeletionMarked:       func() any { return new(messages.LayerVersionPayload) },
	messages.LayerDeleteRejected:       func() any { return new(messages.LayerRejectedPayload) },
	messages.LayerVersionDeleted:       func() any { return new(messages.LayerRemovedPayload) },
	messages.LayerVersionDeleteFail:    func() any { return new(messages.LayerRejectedPayload) },
	messages.TimerCreated:              func() any { return new(messages.TimerCreatedPayload) },
	messages.TimerDeleted:              func() any { return new(messages.TimerDeletedPayload) },
	messages.TimerFired:                func() any { return new(messages.TimerFiredPayload) },
	messages.TimerFailed:               func() any { return new(messages.TimerFailedPayload) },
	messages.OrgEventCreated:           func() any { return new(messages.OrgCreatedPayload) },
	messages.UserRegistered:            func() any { return new(messages.UserRegisteredPayload) },
	messages.UserSuspended:             func() any { return new(messages.UserSuspendedPayload) },
	messages.ProjectCreated:            func() any { return new(messages.ProjectCreatedPayload) },
	messages.SettingsUpdated:           func() any { return new(messages.SettingsUpdatedPayload) },
	messages.SecretStored:              func() any { return new(messages.SecretStoredPayload) },
	messages.SecretRotated:             func() any { return new(messages.SecretStoredPayload) },
	messages.OrgRejected:               func() any { return new(messages.OrgRejectedPayload) },
	messages.TaskQueued:                func() any { return new(messages.TaskQueuedPayload) },
	messages.TaskLeased:                func() any { return new(messages.TaskLeasedPayload) },
	messages.TaskLeaseEmpty:            func() any { return new(messages.TaskLeaseEmptyPayload) },
	messages.TaskStarted:               func() any { return new(messages.TaskChangedPayload) },
	messages.TaskProgressed:            func() any { return new(messages.TaskProgressedPayload) },
	messages.TaskAwaitingResponse:      func() any { return new(messages.TaskChangedPayload) },
	messages.TaskResponseReceived:      func() any { return new(messages.TaskChangedPayload) },
	messages.TaskCompleted:             func() any { return new(messages.TaskChangedPayload) },
	messages.TaskFailed:                func() any { return new(messages.TaskChangedPayload) },
	messages.TaskCancelled:             func() any { return new(messages.TaskChangedPayload) },
	messages.TaskRequeued:              func() any { return new(messages.TaskChangedPayload) },
	messages.TaskStuck:                 func() any { return new(messages.TaskChangedPayload) },
	messages.AgentStale:                func() any { return new(messages.AgentStatusPayload) },
	messages.AgentOffline:              func() any { return new(messages.AgentStatusPayload) },
	messages.TaskRejected:              func() any { return new(messages.TaskRejectedPayload) },
	messages.AccountRegistered:         func() any { return new(messages.AccountPayload) },
	messages.AccountUpdated:            func() any { return new(messages.AccountPayload) },
	messages.AccountTested:             func() any { return new(messages.AccountTestedPayload) },
	messages.ScheduleUpserted:          func() any { return new(messages.SchedulePayload) },
	messages.ScheduleEnabled:           func() any { return new(messages.SchedulePayload) },
	messages.ScheduleDisabled:          func() any { return new(messages.SchedulePayload) },
	messages.ScheduleDeleted:           func() any { return new(messages.ScheduleDeletedPayload) },
	messages.ResourceAttached:          func() any { return new(messages.ResourceEventPayload) },
	messages.ResourceDetached:          func() any { return new(messages.ResourceEventPayload) },
	messages.ScheduleWindowExecuted:    func() any { return new(messages.WindowExecutedPayload) },
	messages.NucleusRejected:           func() any { return new(messages.NucleusRejectedPayload) },
}

// example is a ```json block of a docs page that holds a message envelope.
type example struct {
	where string // page:line
	body  []byte
}

func jsonBlocks(t *testing.T) []example {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	var out []example
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		sc := bufio.NewScanner(bytes.NewReader(b))
		var block *bytes.Buffer
		start := 0
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case block == nil && strings.TrimSpace(line) == "```json":
				block, start = &bytes.Buffer{}, n
			case block != nil && strings.TrimSpace(line) == "```":
				out = append(out, example{where: filepath.Base(page) + ":" + strconv.Itoa(start), body: block.Bytes()})
				block = nil
			case block != nil:
				block.WriteString(line + "\n")
			}
		}
	}
	return out
}

// TestDocs_examples_match_the_payload_types: every message example on the
// docs pages is an envelope whose payload decodes, strictly, into its
// type's Go payload and names every field that is always sent; commands
// also pass validation. Every command and event type has an example.
func TestDocs_examples_match_the_payload_types(t *testing.T) {
	shown := map[string]bool{}
	for _, ex := range jsonBlocks(t) {
		var fields map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(ex.body, &fields), "%s: not JSON", ex.where)
		if fields["type"] == nil || fields["payload"] == nil {
			continue // not a message (a stream record, a rule)
		}
		var env messages.Envelope
		dec := json.NewDecoder(bytes.NewReader(ex.body))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&env), "%s: not an envelope", ex.where)

		// Commands and events may share a name; an event always names
		// its cause.
		isEvent := messages.IsEvent(env.Type) && (env.CausationID != "" || !messages.IsCommand(env.Type))
		var payload any
		switch {
		case isEvent:
			newPayload, ok := eventPayloads[env.Type]
			require.True(t, ok, "%s: event %s has no entry in eventPayloads", ex.where, env.Type)
			payload = newPayload()
		case messages.IsCommand(env.Type):
			payload, _ = messages.NewCommandPayload(env.Type)
		default:
			t.Errorf("%s: %s is neither a command nor an event", ex.where, env.Type)
			continue
		}
		pdec := json.NewDecoder(bytes.NewReader(env.Payload))
		pdec.DisallowUnknownFields()
		require.NoError(t, pdec.Decode(payload), "%s: %s payload", ex.where, env.Type)

		// What the Go type always sends must be in the example.
		var given, sent map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(env.Payload, &given))
		b, err := json.Marshal(payload)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &sent))
		for k := range sent {
			require.Contains(t, given, k, "%s: %s example lacks field %q", ex.where, env.Type, k)
		}
		if v, ok := payload.(interface{ Validate() error }); ok {
			require.NoError(t, v.Validate(), "%s: %s example is invalid", ex.where, env.Type)
		}
		kind := "command "
		if isEvent {
			kind = "event "
		}
		shown[kind+string(env.Type)] = true
	}

	var missing []string
	for _, d := range messages.Domains() {
		for _, c := range messages.Commands(d) {
			if !shown["command "+string(c)] {
				missing = append(missing, "command "+string(c))
			}
		}
		for _, e := range messages.Events(d) {
			if _, ok := eventPayloads[e]; !ok {
				t.Errorf("event %s has no entry in eventPayloads", e)
			}
			if !shown["event "+string(e)] {
				missing = append(missing, "event "+string(e))
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "message types without an example on a docs page")
}
