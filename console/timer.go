package console

import (
	"net/http"
	"time"

	"transit/store"
)

// dueWindow is how far ahead the timers page looks.
const dueWindow = time.Hour

type shardRow struct {
	store.Shard
	Lapsed bool
	Due    []store.Timer
}

// timers shows each shard's owner and version, and its timers due within
// dueWindow, earliest first.
func (c *Console) timers(w http.ResponseWriter, r *http.Request) {
	shards, err := c.svc.Store.Shards(r.Context(), c.svc.Config.TimerShards)
	if err != nil {
		c.fail(w, r, "the timer shards", err)
		return
	}
	now := time.Now()
	rows := make([]shardRow, len(shards))
	for i, sh := range shards {
		due, err := c.svc.Store.DueTimers(r.Context(), sh.ShardID, now.Add(dueWindow))
		if err != nil {
			c.fail(w, r, "the due timers", err)
			return
		}
		rows[i] = shardRow{Shard: sh, Lapsed: sh.Version == 0 || sh.Owner == "" || sh.Lapsed(c.svc.Config.TimerLease, now), Due: due}
	}
	c.render(w, r, http.StatusOK, "timers", map[string]any{"Shards": rows, "Window": dueWindow})
}
