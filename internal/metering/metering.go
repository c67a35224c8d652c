// Package metering counts what a transit process costs: AWS requests by
// service and operation, DynamoDB capacity units, CPU time and heap
// allocations. The benchmark's two workers, `transit-bench bench-serve`
// (transit's serve) and `transit-bench bench-baseline`, write the same
// report with --stats-out, so the two compare line by line. The transit
// binary does not import it.
package metering

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"transit/internal/awscall"
)

// Meter counts AWS requests and DynamoDB consumed capacity. Safe for
// concurrent use.
type Meter struct {
	// prefix is the stack's, left out of the table names in Units.
	prefix   string
	mu       sync.Mutex
	requests map[string]int64
	read     float64
	write    float64
	units    map[string]float64
}

// New returns an empty meter of the stack whose table names start with
// prefix.
func New(prefix string) *Meter {
	return &Meter{prefix: prefix + "-", requests: map[string]int64{}, units: map[string]float64{}}
}

// Attach makes every client built from cfg count through m, and asks
// DynamoDB to return consumed capacity (with indexes) on every call.
func (m *Meter) Attach(cfg *aws.Config) { awscall.Attach(cfg, "transit.meter", m.record) }

func (m *Meter) record(c awscall.Call) {
	units := 0.0
	for _, cc := range c.Capacity {
		units += aws.ToFloat64(cc.CapacityUnits)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[c.Service+"."+c.Operation]++
	kind := "read "
	if c.Write {
		m.write += units
		kind = "write "
		if c.Operation == "TransactWriteItems" {
			kind = TransactWrite + " "
		}
	} else {
		m.read += units
	}
	for _, sh := range c.Shares() {
		key := kind + strings.TrimPrefix(sh.Table, m.prefix)
		if sh.Index != "" {
			key += "/" + sh.Index
		}
		m.units[key] += sh.Units
	}
}

// TransactWrite is the kind of Units a write transaction consumed.
const TransactWrite = "transact-write"

// Report is a process's cost over a run.
type Report struct {
	// Requests counts AWS calls by "Service.Operation".
	Requests map[string]int64 `json:"requests"`
	// ReadUnits and WriteUnits are DynamoDB capacity units as DynamoDB
	// reported them (indexes included).
	ReadUnits  float64 `json:"read_units"`
	WriteUnits float64 `json:"write_units"`
	// Units splits them by "<kind> <table>[/<index>]", kind read, write
	// or TransactWrite (the write units of TransactWriteItems, which
	// emulators and AWS count differently).
	Units map[string]float64 `json:"units"`
	// CPU is user plus system time of the whole process.
	CPU time.Duration `json:"cpu_ns"`
	// Mallocs and AllocBytes are cumulative heap allocations.
	Mallocs    uint64 `json:"mallocs"`
	AllocBytes uint64 `json:"alloc_bytes"`
}

// Report reads the counters and the process's CPU and allocation totals.
func (m *Meter) Report() Report {
	m.mu.Lock()
	r := Report{Requests: maps.Clone(m.requests), ReadUnits: m.read, WriteUnits: m.write, Units: maps.Clone(m.units)}
	m.mu.Unlock()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		r.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.Mallocs, r.AllocBytes = ms.Mallocs, ms.TotalAlloc
	return r
}

// WriteFile writes the report as JSON.
func (m *Meter) WriteFile(path string) error {
	b, err := json.MarshalIndent(m.Report(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write stats %s: %w", path, err)
	}
	return nil
}

// MarkOnSignal writes m's report to path each time the process gets
// SIGUSR1, so a benchmark can leave start-up out of its figures. The
// returned func stops listening.
func MarkOnSignal(m *Meter, path string) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				_ = m.WriteFile(path + ".tmp")
				_ = os.Rename(path+".tmp", path)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// Minus is what happened between an earlier report and r.
func (r Report) Minus(earlier Report) Report {
	d := Report{
		Requests:   map[string]int64{},
		ReadUnits:  r.ReadUnits - earlier.ReadUnits,
		WriteUnits: r.WriteUnits - earlier.WriteUnits,
		CPU:        r.CPU - earlier.CPU,
		Mallocs:    r.Mallocs - earlier.Mallocs,
		AllocBytes: r.AllocBytes - earlier.AllocBytes,
		Units:      map[string]float64{},
	}
	for k, v := range r.Requests {
		if n := v - earlier.Requests[k]; n != 0 {
			d.Requests[k] = n
		}
	}
	for k, v := range r.Units {
		if n := v - earlier.Units[k]; n != 0 {
			d.Units[k] = n
		}
	}
	return d
}
