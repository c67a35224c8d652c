package console

import (
	"context"
	"net/http"
	"sort"
	"time"

	"transit/config"
	"transit/service"
)

// overviewData is the overview: per domain its queues, dead letters and
// the last minute's counts, and who owns the timer shards and stream
// leases.
type overviewData struct {
	Status  service.Status
	Domains []domainRow
	Shards  []owned
	Leases  []owned
	At      time.Time
}

type domainRow struct {
	service.DomainStatus
	Counts service.Counts
	Window time.Duration
}

// owned is an owner (an instance, or "" for nobody) and how many it holds.
type owned struct {
	Owner string
	Count int
}

// oldestSeen is a domain's oldest dead letter as last read, and the DLQ
// depth it was read at.
type oldestSeen struct {
	depth  int
	oldest *service.DeadLetterSummary
}

// overviewData reads the overview, shared by everyone watching it
// (Console.shared). A DLQ is read for its oldest letter only when its
// depth changed since the last read: reading hides the letters from
// other readers (a redrive, `transit dlq list`) meanwhile, and a live
// overview must not keep them hidden.
func (c *Console) overviewData(ctx context.Context) (overviewData, error) {
	return shared(ctx, c, "overview", func(ctx context.Context) (overviewData, error) {
		st, err := c.svc.Status(ctx, config.HTTPOff, false)
		if err != nil {
			return overviewData{}, err
		}
		for i, ds := range st.Domains {
			if st.Domains[i].Oldest, err = c.oldestOf(ctx, ds); err != nil {
				return overviewData{}, err
			}
		}
		d := overviewData{Status: st, Shards: byOwner(st.TimerShards), Leases: byOwner(st.StreamLeases), At: time.Now()}
		var serve service.ServeStatus
		if c.opts.Counts != nil {
			serve = c.opts.Counts()
		}
		for _, ds := range st.Domains {
			d.Domains = append(d.Domains, domainRow{DomainStatus: ds, Counts: serve.Domains[ds.Domain], Window: serve.Window.Round(time.Second)})
		}
		return d, nil
	})
}

// oldestOf is the oldest dead letter of ds's domain, read again only
// when the DLQ's depth changed; an empty DLQ is not read at all. Only the
// overview's read calls it, one at a time (shared).
func (c *Console) oldestOf(ctx context.Context, ds service.DomainStatus) (*service.DeadLetterSummary, error) {
	if seen, ok := c.oldest[ds.Domain]; ok && seen.depth == ds.DeadLetters {
		return seen.oldest, nil
	}
	var oldest *service.DeadLetterSummary
	if ds.DeadLetters > 0 {
		var err error
		if oldest, err = c.svc.OldestDeadLetter(ctx, ds.Domain); err != nil {
			return nil, err
		}
		if oldest == nil {
			// Every letter hidden by another reader just now: ask again
			// next time rather than remember none.
			return nil, nil
		}
	}
	c.oldest[ds.Domain] = oldestSeen{depth: ds.DeadLetters, oldest: oldest}
	return oldest, nil
}

func byOwner(counts map[string]int) []owned {
	var out []owned
	for o, n := range counts {
		out = append(out, owned{o, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Owner < out[j].Owner })
	return out
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	d, err := c.overviewData(r.Context())
	if err != nil {
		c.fail(w, r, "the stack's status", err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", map[string]any{"Overview": d})
}

// overviewLive streams the overview's figures.
func (c *Console) overviewLive(w http.ResponseWriter, r *http.Request) {
	c.stream(w, r, c.opts.Live, func(ctx context.Context, send func(event, id string, data []byte)) error {
		d, err := c.overviewData(ctx)
		if err != nil {
			return err
		}
		frag, err := c.fragment("overview", "figures", map[string]any{"Overview": d})
		if err == nil {
			send("overview", "", frag)
		}
		return err
	})
}
