package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"transit/internal/metering"
)

// A write transaction's units are scaled to what AWS bills and counted
// with the plain writes of the same table or index.
func TestCostPerCommand_scales_transaction_units(t *testing.T) {
	r := metering.Report{
		WriteUnits: 14,
		Units: map[string]float64{
			"transact-write SandboxPool":             8,
			"transact-write SandboxPool/StatusIndex": 4,
			"write SandboxPool":                      2,
			"read SandboxPool":                       3,
		},
		ReadUnits: 3,
	}
	p := costPerCommand(r, 2, 0.5)
	assert.InDelta(t, 4, p.WriteUnits, 1e-9, "(2 + (8+4)/2) / 2")
	assert.InDelta(t, 1.5, p.ReadUnits, 1e-9)
	assert.Equal(t, map[string]float64{"write SandboxPool": 3, "write SandboxPool/StatusIndex": 1, "read SandboxPool": 1.5}, p.Units)
}
