package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"transit/store"
)

// TestCapacity_every_definition_is_provisionable: provisioned, every table
// and global index has read and write units, auto-scaling reaches ten
// times them, and no index has fewer write units than its table (it would
// throttle the table's writes).
func TestCapacity_every_definition_is_provisionable(t *testing.T) {
	for _, c := range []store.Capacity{
		{Provisioned: true},
		{Provisioned: true, Overrides: map[string]store.Throughput{"SandboxPool": {Read: 1, Write: 400}, "Logs": {Read: 30000, Write: 5000}}},
	} {
		tableWrites := map[string]int32{}
		var indexes int
		for _, target := range store.ScalingTargets("stack", c) {
			assert.Positive(t, target.Min, "%s %s", target.ResourceID, target.Dimension)
			assert.Equal(t, min(10*target.Min, 40000), target.Max, "%s %s: ten times, within a table's quota", target.ResourceID, target.Dimension)
			if target.Dimension == "dynamodb:table:WriteCapacityUnits" {
				tableWrites["table/stack-"+target.Table] = target.Min
			}
		}
		for _, target := range store.ScalingTargets("stack", c) {
			table, _, isIndex := strings.Cut(target.ResourceID, "/index/")
			if isIndex && target.Dimension == "dynamodb:index:WriteCapacityUnits" {
				indexes++
				assert.GreaterOrEqual(t, target.Min, tableWrites[table], "%s writes vs its table's", target.ResourceID)
			}
		}
		assert.Len(t, tableWrites, len(store.Tables))
		assert.Positive(t, indexes)
	}
	assert.Empty(t, store.ScalingTargets("stack", store.Capacity{}), "on demand registers nothing")
}
