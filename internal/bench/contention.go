package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"transit/messages"
	"transit/store"
)

// ContentionResult is the allocation race: 50 allocators, 10 sandboxes.
type ContentionResult struct {
	Rounds     int             `json:"rounds"`
	Allocators int             `json:"allocators"`
	Sandboxes  int             `json:"sandboxes"`
	Correct    int             `json:"correct_rounds"`
	Times      []time.Duration `json:"round_times_ns"`
	Median     time.Duration   `json:"median_ns"`
	Problems   []string        `json:"problems,omitempty"`
}

// runContention races allocators for sandboxes through one transit process
// at concurrency 16, rounds times, each on a fresh set of sandboxes. A
// round is correct when every sandbox went to exactly one allocator and
// every other allocator was told pool_exhausted.
func runContention(ctx context.Context, o Options, rounds, allocators, sandboxes int) (ContentionResult, error) {
	res := ContentionResult{Rounds: rounds, Allocators: allocators, Sandboxes: sandboxes}
	prefix := "bx-" + uuid.NewString()[:6]
	st, err := newStack(ctx, prefix, 0)
	if err != nil {
		return res, err
	}
	defer st.close(ctx)
	w, err := startWorker(o.Executable, o.OutDir, "contention", prefix, 16, nil)
	if err != nil {
		return res, err
	}
	defer func() { _, _ = w.stop() }()
	for r := range rounds {
		// This round's sandboxes replace the last round's (which go stale).
		var inventory []messages.InventoryItem
		for i := range sandboxes {
			inventory = append(inventory, messages.InventoryItem{ExternalID: fmt.Sprintf("r%d-%d", r, i), Name: "race", LabDurationHours: 4})
		}
		if _, err := st.svc.Store.Sync(ctx, store.Cmd{ID: uuid.NewString(), Type: string(messages.SandboxSync), At: time.Now()}, inventory); err != nil {
			return res, err
		}
		began := time.Now()
		won := map[string]int{}
		rejected := 0
		var mu sync.Mutex
		var wg sync.WaitGroup
		var failure error
		for i := range allocators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev, err := st.do(ctx, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: fmt.Sprintf("r%d-track-%d", r, i)})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					failure = err
				case ev.Envelope.Type == messages.SandboxAllocated:
					var p messages.SandboxAllocatedPayload
					_ = json.Unmarshal(ev.Envelope.Payload, &p)
					won[p.SandboxID]++
				default:
					rejected++
				}
			}()
		}
		wg.Wait()
		if failure != nil {
			return res, failure
		}
		res.Times = append(res.Times, time.Since(began))
		ok := len(won) == sandboxes && rejected == allocators-sandboxes
		for id, n := range won {
			if n > 1 {
				ok = false
				res.Problems = append(res.Problems, fmt.Sprintf("round %d: sandbox %s allocated %d times", r, id, n))
			}
		}
		if ok {
			res.Correct++
		} else {
			res.Problems = append(res.Problems, fmt.Sprintf("round %d: %d sandboxes won, %d rejected", r, len(won), rejected))
		}
	}
	sorted := append([]time.Duration(nil), res.Times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	res.Median = sorted[len(sorted)/2]
	return res, nil
}
