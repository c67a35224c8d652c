package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// This file reads the audit trail: the Nucleus audit entries and every
// other domain's command outcomes, merged into one history per entity
// and one global chronological view (DECISIONS.md).

// AuditRecord is one record of the trail: a Nucleus audit entry, or the
// recorded outcome of another domain's command.
type AuditRecord struct {
	// Entity is what the record is about: SCHEDULE#<id>, SANDBOX#<id> ….
	Entity string `json:"entity"`
	// At is when it was decided (ISO 8601, UTC, ms).
	At string `json:"at"`
	// Action is CREATE, UPDATE or EXECUTE for a Nucleus entry; the
	// command's type for an outcome.
	Action string `json:"action"`
	UserID string `json:"user_id,omitempty"`
	// Status is SUCCESS or FAIL for a Nucleus entry; applied or rejected
	// for an outcome.
	Status string `json:"status"`
	// Reason is an outcome's rejection reason; Details a Nucleus entry's
	// JSON.
	Reason        string `json:"reason,omitempty"`
	Details       string `json:"details,omitempty"`
	CommandID     string `json:"command_id"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID is an outcome's causing message, when it has one.
	CausationID string `json:"causation_id,omitempty"`
	sortKey     string
}

func nucleusRecord(e nucleusEntry) AuditRecord {
	return AuditRecord{Entity: strings.TrimPrefix(e.PK, "ENTITY#"), At: sortKeyTime(e.SK), Action: e.Action, UserID: e.UserID,
		Status: e.Status, Details: e.Details, CommandID: e.CommandID, CorrelationID: e.CorrelationID, sortKey: e.SK}
}

func outcomeRecord(o auditItem) AuditRecord {
	return AuditRecord{Entity: strings.TrimPrefix(o.Entity, "ENTITY#"), At: sortKeyTime(o.GSI1SK), Action: o.Action, UserID: o.Actor,
		Status: o.Status, Reason: o.Reason, CommandID: o.CommandID, CorrelationID: o.CorrelationID, CausationID: o.CausationID, sortKey: o.GSI1SK}
}

// sortKeyTime is the time in TIMESTAMP#<time>#….
func sortKeyTime(sk string) string {
	at, _, _ := strings.Cut(strings.TrimPrefix(sk, "TIMESTAMP#"), "#")
	return at
}

// trailQuery reads one page of at most limit records of one trail,
// newest first; more says whether the trail holds older ones.
type trailQuery func(ctx context.Context, limit int32) (records []AuditRecord, more bool, err error)

// trail is the query of a trail's table or index whose items are T.
func trail[T any](s *Store, table, index string, kc expression.KeyConditionBuilder, record func(T) AuditRecord) trailQuery {
	return func(ctx context.Context, limit int32) ([]AuditRecord, bool, error) {
		page, err := newestFirst[T](ctx, s.db, table, index, kc, nil, limit, "")
		if err != nil {
			return nil, false, err
		}
		records := make([]AuditRecord, len(page.Items))
		for i, item := range page.Items {
			records[i] = record(item)
		}
		return records, page.Next != "", nil
	}
}

// merged runs the queries at once, each for at most limit records, and
// merges their records newest first, at most limit; more says whether
// older records remain. A trail whose page ended early (DynamoDB's 1 MB
// page) is complete only down to its last record: older records of the
// others wait for the next page. A command's outcome and its Nucleus
// entry share a sort key: the entry, which says more, is kept.
func merged(ctx context.Context, queries []trailQuery, limit int32) (records []AuditRecord, more bool, err error) {
	results := make([][]AuditRecord, len(queries))
	mores := make([]bool, len(queries))
	errs := make([]error, len(queries))
	var wg sync.WaitGroup
	for i, q := range queries {
		wg.Go(func() { results[i], mores[i], errs[i] = q(ctx, limit) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	floor := ""
	for i, rs := range results {
		if mores[i] && len(rs) > 0 {
			floor = max(floor, rs[len(rs)-1].sortKey)
		}
	}
	all := slices.Concat(results...)
	slices.SortStableFunc(all, func(a, b AuditRecord) int { return strings.Compare(b.sortKey, a.sortKey) })
	all = slices.CompactFunc(all, func(a, b AuditRecord) bool { return a.sortKey == b.sortKey && a.CommandID == b.CommandID })
	if cut := slices.IndexFunc(all, func(r AuditRecord) bool { return r.sortKey < floor }); cut >= 0 {
		all, more = all[:cut], true
	}
	if len(all) > int(limit) {
		all, more = all[:limit], true
	}
	return all, more || slices.Contains(mores, true), nil
}

// EntityHistory is one page of an entity's history, newest first, from
// cursor (a Page's Next; "" for the first): its Nucleus audit entries and
// the outcomes of the commands that named it, whatever their domain.
// entity is typed, as the records name it: SCHEDULE#<id>, ACCOUNT#<id>,
// SANDBOX#<id>, TASK#<org>/<id> ….
func (s *Store) EntityHistory(ctx context.Context, entity string, limit int32, cursor string) (Page[AuditRecord], error) {
	pk := "ENTITY#" + entity
	before := "TIMESTAMP#~" // after every time
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !strings.HasPrefix(string(b), "TIMESTAMP#") {
			return Page[AuditRecord]{}, ErrBadCursor
		}
		before = string(b)
	}
	records, more, err := merged(ctx, []trailQuery{
		trail(s, s.nucleusAudit, "", expression.Key("pk").Equal(expression.Value(pk)).And(expression.Key("sk").LessThan(expression.Value(before))), nucleusRecord),
		trail(s, s.audit, "EntityIndex", expression.Key("entity").Equal(expression.Value(pk)).And(expression.Key("gsi1sk").LessThan(expression.Value(before))), outcomeRecord),
	}, limit)
	if err != nil {
		return Page[AuditRecord]{}, fmt.Errorf("history of %s: %w", entity, err)
	}
	page := Page[AuditRecord]{Items: records}
	if more && len(records) > 0 {
		page.Next = base64.RawURLEncoding.EncodeToString([]byte(records[len(records)-1].sortKey))
	}
	return page, nil
}

// RecentAudit is the global chronological view: the newest limit records
// since since, newest first, merged across every key of both trails'
// global indexes.
func (s *Store) RecentAudit(ctx context.Context, since time.Time, limit int32) ([]AuditRecord, error) {
	from := auditSortKey(since)
	var queries []trailQuery
	for n := range AuditGlobalKeys {
		kc := expression.Key("gsi1pk").Equal(expression.Value(globalPartition(n))).
			And(expression.Key("gsi1sk").GreaterThanEqual(expression.Value(from)))
		queries = append(queries, trail(s, s.nucleusAudit, "GSI1", kc, nucleusRecord), trail(s, s.audit, "GlobalIndex", kc, outcomeRecord))
	}
	records, _, err := merged(ctx, queries, limit)
	if err != nil {
		return nil, fmt.Errorf("recent audit: %w", err)
	}
	return records, nil
}
