package console

import (
	"bytes"
	"context"
	"fmt"
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

// overviewData reads the overview. A DLQ is read for its oldest letter
// only when its depth changed since the last read: reading hides the
// letters from other readers (a redrive, `transit dlq list`) meanwhile,
// and a live overview must not keep them hidden.
func (c *Console) overviewData(ctx context.Context) (overviewData, error) {
	st, err := c.svc.Status(ctx, config.HTTPOff, false)
	if err != nil {
		return overviewData{}, err
	}
	for i, ds := range st.Domains {
		c.mu.Lock()
		seen, ok := c.oldest[ds.Domain]
		c.mu.Unlock()
		if !ok || seen.depth != ds.DeadLetters {
			seen.depth = ds.DeadLetters
			if seen.oldest, err = c.svc.OldestDeadLetter(ctx, ds.Domain); err != nil {
				return overviewData{}, err
			}
			c.mu.Lock()
			c.oldest[ds.Domain] = seen
			c.mu.Unlock()
		}
		st.Domains[i].Oldest = seen.oldest
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
	c.render(w, r, "overview", map[string]any{"Overview": d})
}

// overviewLive streams the overview's figures as Server-Sent Events, one
// rendered fragment every Live, until the client goes. Nothing is read
// from AWS while nobody watches.
func (c *Console) overviewLive(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	tick := time.NewTicker(c.opts.Live)
	defer tick.Stop()
	for {
		var buf bytes.Buffer
		d, err := c.overviewData(r.Context())
		if err == nil {
			err = c.pages["overview"].ExecuteTemplate(&buf, "figures", map[string]any{"Overview": d})
		}
		if err != nil {
			c.opts.Logger.Warn("console live overview", "error", err)
		} else {
			writeEvent(w, "overview", buf.Bytes())
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// writeEvent writes one Server-Sent Event, each line of data its own
// data field.
func writeEvent(w http.ResponseWriter, event string, data []byte) {
	fmt.Fprintf(w, "event: %s\n", event)
	for _, line := range bytes.Split(data, []byte("\n")) {
		fmt.Fprintf(w, "data: %s\n", line)
	}
	fmt.Fprint(w, "\n")
}
