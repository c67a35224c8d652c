package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/metering"
)

// pipelineRun is a transit run of n commands in elapsed that cost, per
// command, the given units (AWS-billed plain writes and reads), one
// write transaction, one publish, half an SQS request and cpu.
func pipelineRun(n int, elapsed, cpu time.Duration, units map[string]float64) PipelineResult {
	cost := metering.Report{Requests: map[string]int64{"DynamoDB.TransactWriteItems": int64(n), "SNS.Publish": int64(n), "SQS.ReceiveMessage": int64(n / 2)}, Units: map[string]float64{}, CPU: cpu * time.Duration(n)}
	for u, v := range units {
		cost.Units[u] = v * float64(n)
		if strings.HasPrefix(u, "read ") {
			cost.ReadUnits += v * float64(n)
		} else {
			cost.WriteUnits += v * float64(n)
		}
	}
	return PipelineResult{Role: RoleTransit, Concurrency: 16, Replicas: 1, Commands: n, Elapsed: elapsed, PerSecond: float64(n) / elapsed.Seconds(), Cost: cost}
}

var modelUnits = map[string]float64{
	"write SandboxPool":             1,
	"write SandboxPool/StatusIndex": 4,
	"write Audit/GlobalIndex":       2,
	"read SandboxPool":              1,
}

// Each table and index takes its units times the rate, and the key that
// throttles first is the one whose busiest value reaches a partition's
// 1,000 write units first: StatusIndex's, which takes half of the
// index's 4 units a command, at 500 commands/s.
func TestCapacityModel_scales_units_and_finds_the_first_throttle(t *testing.T) {
	m, err := newModel(Report{TransactUnitsScale: 1, Pipeline: []PipelineResult{pipelineRun(100, 10*time.Second, 2*time.Millisecond, modelUnits)}})
	require.NoError(t, err)
	l := m.at(1000, false)
	byName := map[string]tableLoad{}
	for _, tl := range l.tables() {
		byName[tl.Name] = tl
	}
	status := byName["SandboxPool/StatusIndex"]
	assert.InDelta(t, 4000, status.Write, 1e-6)
	assert.Equal(t, 4, status.Partitions)
	assert.InDelta(t, 500, status.ThrottlesAt, 1e-6)
	assert.InDelta(t, 4000, byName["Audit/GlobalIndex"].ThrottlesAt, 1e-6, "2 units over 8 keys")
	pool := byName["SandboxPool"]
	assert.InDelta(t, 1000, pool.Read, 1e-6)
	assert.InDelta(t, 40000, pool.ThrottlesAt, 1e-6, "the table quota: 1 unit a command each way")
	assert.InDelta(t, 2, l.Cores, 1e-6)
	assert.Equal(t, 2, l.replicas(), "2 cores fit two replicas of 2 at 70 %")

	onDemand, provisioned, messaging := l.monthly()
	seconds := 730 * 3600.0
	assert.InDelta(t, (7000*0.625+1000*0.125)*seconds/1e6, onDemand, 1e-6)
	assert.InDelta(t, (7000*0.00065+1000*0.00013)/0.7*730, provisioned, 1e-6)
	assert.InDelta(t, (1000*0.5+500*0.4)*seconds/1e6, messaging, 1e-6)
}

// The check predicts a second run of the mix from the first's costs: a
// run that cost the same per command is within 20 %, one whose writes
// cost half as much again is not.
func TestCapacityModel_check_against_a_second_run(t *testing.T) {
	first := pipelineRun(100, 10*time.Second, 2*time.Millisecond, modelUnits)
	same := pipelineRun(200, 15*time.Second, 2100*time.Microsecond, modelUnits)
	heavier := map[string]float64{}
	for u, v := range modelUnits {
		heavier[u] = v
		if strings.HasPrefix(u, "write ") {
			heavier[u] = 1.5 * v
		}
	}
	for name, tc := range map[string]struct {
		run    PipelineResult
		within bool
	}{"same costs": {same, true}, "heavier writes": {pipelineRun(200, 15*time.Second, 2*time.Millisecond, heavier), false}} {
		r := Report{TransactUnitsScale: 1, Pipeline: []PipelineResult{first}, Scale: &ScaleCase{Runs: []PipelineResult{tc.run}}}
		m, err := newModel(r)
		require.NoError(t, err)
		for _, c := range m.check(r, tc.run) {
			want := tc.within || !strings.HasPrefix(c.What, "DynamoDB write")
			assert.Equal(t, want, c.within(), "%s: %s predicted %.1f, measured %.1f", name, c.What, c.Predicted, c.Measured)
		}
		var doc strings.Builder
		require.NoError(t, WriteCapacityModel(&doc, r))
		assert.Contains(t, doc.String(), "SandboxPool/StatusIndex (one key's partition, 1,000 write units/s), at about 500 commands/s")
		assert.Equal(t, !tc.within, strings.Contains(doc.String(), "**no**"), name)
	}
}
