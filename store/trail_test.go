package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// page is a trail query answering records with these sort keys, and
// whether the trail holds more.
func page(more bool, keys ...string) trailQuery {
	return func(_ context.Context, limit int32) ([]AuditRecord, bool, error) {
		var rs []AuditRecord
		for _, k := range keys {
			rs = append(rs, AuditRecord{sortKey: k, CommandID: k})
		}
		return rs, more, nil
	}
}

func keysOf(rs []AuditRecord) []string {
	var ks []string
	for _, r := range rs {
		ks = append(ks, r.sortKey)
	}
	return ks
}

// TestMerged_newest_first_across_trails: records of every trail, newest
// first, cut at the limit.
func TestMerged_newest_first_across_trails(t *testing.T) {
	rs, more, err := merged(context.Background(), []trailQuery{page(false, "T#5", "T#2"), page(false, "T#4", "T#3", "T#1")}, 4)
	require.NoError(t, err)
	assert.Equal(t, []string{"T#5", "T#4", "T#3", "T#2"}, keysOf(rs))
	assert.True(t, more, "T#1 is left")
}

// TestMerged_waits_for_a_trail_whose_page_ended_early: a trail that
// returned fewer records than asked yet has more (DynamoDB's 1 MB page)
// is complete only down to its last record; the other trail's older
// records are left for the next page rather than skipped.
func TestMerged_waits_for_a_trail_whose_page_ended_early(t *testing.T) {
	rs, more, err := merged(context.Background(), []trailQuery{page(true, "T#9", "T#6"), page(false, "T#8", "T#5", "T#4", "T#3")}, 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"T#9", "T#8", "T#6"}, keysOf(rs))
	assert.True(t, more)
}

// TestMerged_folds_an_outcome_into_its_entry: a record of one command in
// both trails under one sort key appears once, as the first query's.
func TestMerged_folds_an_outcome_into_its_entry(t *testing.T) {
	entry := func(_ context.Context, _ int32) ([]AuditRecord, bool, error) {
		return []AuditRecord{{sortKey: "T#1#c", CommandID: "c", Action: ActionCreate}}, false, nil
	}
	outcome := func(_ context.Context, _ int32) ([]AuditRecord, bool, error) {
		return []AuditRecord{{sortKey: "T#1#c", CommandID: "c", Action: "schedule.upserted"}}, false, nil
	}
	rs, more, err := merged(context.Background(), []trailQuery{entry, outcome}, 10)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Equal(t, ActionCreate, rs[0].Action)
	assert.False(t, more)
}
