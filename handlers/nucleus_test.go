package handlers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/timers"
)

// TestLatest_is_the_last_fire_time_up_to_now: the fire times after a
// window and not after now, the last of them; none when the cron has not
// fired since.
func TestLatest_is_the_last_fire_time_up_to_now(t *testing.T) {
	daily, err := timers.ParseCron("0 19 * * *", "UTC")
	require.NoError(t, err)
	quarter, err := timers.ParseCron("*/15 * * * *", "UTC")
	require.NoError(t, err)
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		cron timers.Cron
		now  time.Time
		want time.Time
	}{
		{"not fired since", daily, at.Add(time.Hour), time.Time{}},
		{"fired once", daily, at.Add(12 * time.Hour), time.Date(2026, 11, 20, 19, 0, 0, 0, time.UTC)},
		{"fired on each of three days", daily, at.Add(72 * time.Hour), time.Date(2026, 11, 22, 19, 0, 0, 0, time.UTC)},
		{"exactly now", daily, time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC), time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)},
		{"every quarter hour for two days", quarter, at.Add(48*time.Hour + 7*time.Minute), at.Add(48 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, latest(tc.cron, at, tc.now).UTC())
		})
	}
}
