package console

import (
	"net/http"
	"time"

	"transit/store"
)

// windowTime is a schedule's next window, in the schedule's zone; the
// page shows it in the viewer's zone too (static/console.js).
type windowTime struct {
	UTC   time.Time
	Zoned string
}

type scheduleRow struct {
	store.Schedule
	NextStart, NextStop *windowTime
}

// zoned is at (stored UTC) in zone; nil when at is empty or unreadable.
func zoned(at, zone string) *windowTime {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil
	}
	w := &windowTime{UTC: t, Zoned: t.Format("2006-01-02 15:04 MST")}
	if loc, err := time.LoadLocation(zone); err == nil {
		w.Zoned = t.In(loc).Format("2006-01-02 15:04 MST")
	}
	return w
}

func rowOf(s store.Schedule) scheduleRow {
	return scheduleRow{Schedule: s, NextStart: zoned(s.NextStartAt, s.Timezone), NextStop: zoned(s.NextStopAt, s.Timezone)}
}

// schedules shows Nucleus's accounts and schedules with their next
// windows.
func (c *Console) schedules(w http.ResponseWriter, r *http.Request) {
	accounts, err := c.svc.Store.Accounts(r.Context())
	if err != nil {
		c.fail(w, r, "the accounts", err)
		return
	}
	schedules, err := c.svc.Store.Schedules(r.Context())
	if err != nil {
		c.fail(w, r, "the schedules", err)
		return
	}
	rows := make([]scheduleRow, len(schedules))
	for i, s := range schedules {
		rows[i] = rowOf(s)
	}
	c.render(w, r, http.StatusOK, "schedules", map[string]any{"Accounts": accounts, "Schedules": rows})
}

// schedule shows one schedule and its resources with what their last
// window did.
func (c *Console) schedule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s, resources, found, err := c.svc.Store.GetSchedule(r.Context(), id)
	if err != nil {
		c.fail(w, r, "schedule "+id, err)
		return
	}
	if !found {
		http.Error(w, "no schedule "+id, http.StatusNotFound)
		return
	}
	c.render(w, r, http.StatusOK, "schedule", map[string]any{"Schedule": rowOf(s), "Resources": resources})
}
