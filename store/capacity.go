package store

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
)

// Throughput is provisioned read and write capacity units.
type Throughput struct{ Read, Write int64 }

// defaultCapacity is the figure of the tables whose designs give none
// (timers, layers, audit, stream leases, Nucleus): small, since
// auto-scaling raises it under load.
var defaultCapacity = Throughput{Read: 5, Write: 5}

// Capacity is how the tables are billed: on demand, or provisioned with
// each definition's figures (Table.Capacity) and auto-scaling.
type Capacity struct {
	// Provisioned bills by provisioned units; false, on demand.
	Provisioned bool
	// Overrides replace the figures of tables, by definition name
	// (Table.Name), for the table and each of its global indexes.
	Overrides map[string]Throughput
}

// Auto-scaling of provisioned tables: every table and global index, reads
// and writes alike, is kept at ScaleUtilization percent of its units,
// between its figure and ScaleMaxFactor times it, within a table's
// default quota (maxUnits).
const (
	ScaleUtilization = 70.0
	ScaleMaxFactor   = 10
)

// table is t's figures.
func (c Capacity) table(t Table) Throughput {
	if o, ok := c.Overrides[t.Name]; ok {
		return o
	}
	return t.Capacity
}

// index is the figures of t's global index ix: its own, unless it has
// none or its table's are overridden.
func (c Capacity) index(t Table, ix Index) Throughput {
	if _, ok := c.Overrides[t.Name]; ok || ix.Capacity == (Throughput{}) {
		return c.table(t)
	}
	return ix.Capacity
}

// maxUnits is DynamoDB's default quota of read or write units per table.
const maxUnits = 40000

// ParseCapacityOverrides reads per-table figures written
// "Tasks=50/40,Logs=200/100": a table's definition name (Table.Name), its
// read units, then its write units.
func ParseCapacityOverrides(s string) (map[string]Throughput, error) {
	out := map[string]Throughput{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	var errs []error
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, figures, ok := strings.Cut(item, "=")
		r, w, ok2 := strings.Cut(figures, "/")
		read, rerr := strconv.ParseInt(r, 10, 64)
		write, werr := strconv.ParseInt(w, 10, 64)
		switch {
		case !ok || !ok2 || rerr != nil || werr != nil || read < 1 || write < 1 || read > maxUnits || write > maxUnits:
			errs = append(errs, fmt.Errorf("%q is not TABLE=READ/WRITE with whole numbers of units from 1 to %d", item, maxUnits))
		case !slices.ContainsFunc(Tables, func(t Table) bool { return t.Name == name }):
			errs = append(errs, fmt.Errorf("%q: no table %q, want one of %s", item, name, strings.Join(tableDefinitionNames(), ", ")))
		default:
			if _, dup := out[name]; dup {
				errs = append(errs, fmt.Errorf("%q: table %s given twice", item, name))
			}
			out[name] = Throughput{Read: read, Write: write}
		}
	}
	return out, errors.Join(errs...)
}

func tableDefinitionNames() []string {
	names := make([]string, len(Tables))
	for i, t := range Tables {
		names[i] = t.Name
	}
	return names
}

// ScalingTarget is one capacity Application Auto Scaling keeps at
// ScaleUtilization: a table's or global index's reads or writes.
type ScalingTarget struct {
	// Table is the definition name of the table it belongs to.
	Table string
	// ResourceID is "table/NAME" or "table/NAME/index/INDEX".
	ResourceID string
	Dimension  aastypes.ScalableDimension
	Metric     aastypes.MetricType
	Min, Max   int32
}

// ScalingTargets lists what provisioning registers with Application Auto
// Scaling for the stack named by prefix: nothing on demand; otherwise
// every table's and global index's reads and writes.
func ScalingTargets(prefix string, c Capacity) []ScalingTarget {
	if !c.Provisioned {
		return nil
	}
	var out []ScalingTarget
	add := func(t Table, resource string, units Throughput, read, write aastypes.ScalableDimension) {
		out = append(out,
			ScalingTarget{Table: t.Name, ResourceID: resource, Dimension: read, Metric: aastypes.MetricTypeDynamoDBReadCapacityUtilization,
				Min: int32(units.Read), Max: int32(min(units.Read*ScaleMaxFactor, maxUnits))},
			ScalingTarget{Table: t.Name, ResourceID: resource, Dimension: write, Metric: aastypes.MetricTypeDynamoDBWriteCapacityUtilization,
				Min: int32(units.Write), Max: int32(min(units.Write*ScaleMaxFactor, maxUnits))})
	}
	for _, t := range Tables {
		resource := "table/" + TableName(prefix, t)
		add(t, resource, c.table(t), aastypes.ScalableDimensionDynamoDBTableReadCapacityUnits, aastypes.ScalableDimensionDynamoDBTableWriteCapacityUnits)
		for _, ix := range t.GlobalIndexes {
			add(t, resource+"/index/"+ix.Name, c.index(t, ix), aastypes.ScalableDimensionDynamoDBIndexReadCapacityUnits, aastypes.ScalableDimensionDynamoDBIndexWriteCapacityUnits)
		}
	}
	return out
}

// PolicyName is the name of target's target-tracking policy.
func (target ScalingTarget) PolicyName() string {
	return fmt.Sprintf("%s-%s", strings.ReplaceAll(target.ResourceID, "/", "-"), target.Metric)
}
