package timers

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func instant(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return at
}

// TestCronNext calls Next repeatedly from after, each time from the
// instant the previous call gave, and expects want in order. Berlin is CET
// (UTC+1) and CEST (UTC+2), switching 2026-03-29 01:00Z and 2026-10-25
// 01:00Z; New York is EST (UTC-5) and EDT (UTC-4), switching 2026-03-08
// 07:00Z and 2026-11-01 06:00Z; Lord Howe is UTC+10:30 and UTC+11,
// switching 2026-04-04 15:00Z and 2026-10-03 15:30Z.
func TestCronNext(t *testing.T) {
	tests := []struct {
		name, spec, tz, after string
		want                  []string
	}{
		{
			// 02:30 does not exist on the 29th: it fires when the gap
			// ends, 03:00 CEST.
			name: "Berlin spring forward, daily 02:30 fires at 03:00 CEST",
			spec: "30 2 * * *", tz: "Europe/Berlin", after: "2026-03-28T02:00:00Z",
			want: []string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"},
		},
		{
			// 02:00, 02:15, 02:30, 02:45 and 03:00 all come to 03:00 CEST:
			// once.
			name: "Berlin spring forward, every 15 minutes from 01:50 CET",
			spec: "*/15 * * * *", tz: "Europe/Berlin", after: "2026-03-29T00:50:00Z",
			want: []string{"2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z", "2026-03-29T01:30:00Z"},
		},
		{
			name: "Berlin spring forward, every 15 minutes from 01:20 CET",
			spec: "*/15 * * * *", tz: "Europe/Berlin", after: "2026-03-29T00:20:00Z",
			want: []string{"2026-03-29T00:30:00Z", "2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z"},
		},
		{
			// 02:30 CEST (00:30Z), not 02:30 CET (01:30Z); then 02:30 CET
			// on the 26th.
			name: "Berlin fall back, daily 02:30 fires at its first occurrence",
			spec: "30 2 * * *", tz: "Europe/Berlin", after: "2026-10-24T01:00:00Z",
			want: []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		},
		{
			name: "Berlin fall back, daily 02:30 from 02:10 CET of the second pass",
			spec: "30 2 * * *", tz: "Europe/Berlin", after: "2026-10-25T01:10:00Z",
			want: []string{"2026-10-26T01:30:00Z"},
		},
		{
			// 02:00-02:45 CEST, then not again in CET: next is 03:00 CET.
			name: "Berlin fall back, every 15 minutes from 01:50 CEST",
			spec: "*/15 * * * *", tz: "Europe/Berlin", after: "2026-10-24T23:50:00Z",
			want: []string{
				"2026-10-25T00:00:00Z", "2026-10-25T00:15:00Z", "2026-10-25T00:30:00Z",
				"2026-10-25T00:45:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:15:00Z",
			},
		},
		{
			name: "New York weekdays 08:00 in winter (EST)",
			spec: "0 8 * * 1-5", tz: "America/New_York", after: "2026-01-15T00:00:00Z",
			want: []string{"2026-01-15T13:00:00Z", "2026-01-16T13:00:00Z", "2026-01-19T13:00:00Z"},
		},
		{
			name: "New York weekdays 08:00 in summer (EDT)",
			spec: "0 8 * * 1-5", tz: "America/New_York", after: "2026-07-15T00:00:00Z",
			want: []string{"2026-07-15T12:00:00Z"},
		},
		{
			// Friday 6 March 08:00 EST; Sunday the 8th switches to EDT.
			name: "New York weekdays 08:00 across spring forward",
			spec: "0 8 * * 1-5", tz: "America/New_York", after: "2026-03-06T13:00:00Z",
			want: []string{"2026-03-09T12:00:00Z", "2026-03-10T12:00:00Z"},
		},
		{
			// Friday 30 October 08:00 EDT; Sunday 1 November switches to EST.
			name: "New York weekdays 08:00 across fall back",
			spec: "0 8 * * 1-5", tz: "America/New_York", after: "2026-10-30T12:00:00Z",
			want: []string{"2026-11-02T13:00:00Z", "2026-11-03T13:00:00Z"},
		},
		{
			name: "Lord Howe fall back by 30 minutes, daily 01:45 fires at its first occurrence",
			spec: "45 1 * * *", tz: "Australia/Lord_Howe", after: "2026-04-04T12:00:00Z",
			want: []string{"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"},
		},
		{
			name: "Lord Howe spring forward by 30 minutes, daily 02:15 fires at 02:30",
			spec: "15 2 * * *", tz: "Australia/Lord_Howe", after: "2026-10-03T12:00:00Z",
			want: []string{"2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"},
		},
		{
			// Samoa skipped 30 December 2011, going from UTC-10 to UTC+14.
			name: "Apia skipped day, daily 12:00 fires when the day ends",
			spec: "0 12 * * *", tz: "Pacific/Apia", after: "2011-12-29T12:00:00Z",
			want: []string{"2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"},
		},
		{
			name: "UTC daily 18:00",
			spec: "0 18 * * *", tz: "UTC", after: "2026-05-01T17:59:00Z",
			want: []string{"2026-05-01T18:00:00Z", "2026-05-02T18:00:00Z"},
		},
		{
			name: "UTC every 15 minutes",
			spec: "*/15 * * * *", tz: "UTC", after: "2026-05-01T10:07:30Z",
			want: []string{"2026-05-01T10:15:00Z", "2026-05-01T10:30:00Z", "2026-05-01T10:45:00Z", "2026-05-01T11:00:00Z"},
		},
		{
			name: "after exactly on a match gives the next one",
			spec: "0 18 * * *", tz: "UTC", after: "2026-05-01T18:00:00Z",
			want: []string{"2026-05-02T18:00:00Z"},
		},
		{
			name: "after a nanosecond before a match gives that match",
			spec: "0 18 * * *", tz: "UTC", after: "2026-05-01T17:59:59.999999999Z",
			want: []string{"2026-05-01T18:00:00Z"},
		},
		{
			name: "after in another zone than the cron's",
			spec: "0 8 * * *", tz: "Europe/Berlin", after: "2026-06-10T02:00:00-04:00",
			want: []string{"2026-06-11T06:00:00Z"},
		},
		{
			// Midnight CET, then midnight CEST a 23-hour day later.
			name: "@daily in Berlin across spring forward",
			spec: "@daily", tz: "Europe/Berlin", after: "2026-03-28T12:00:00Z",
			want: []string{"2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},
		},
		{
			name: "@daily in Kolkata (UTC+5:30)",
			spec: "@daily", tz: "Asia/Kolkata", after: "2026-06-10T12:00:00Z",
			want: []string{"2026-06-10T18:30:00Z", "2026-06-11T18:30:00Z"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCron(tc.spec, tc.tz)
			require.NoError(t, err)
			at := instant(t, tc.after)
			for i, w := range tc.want {
				next := c.Next(at)
				require.Truef(t, next.Equal(instant(t, w)), "call %d after %s: got %s, want %s", i+1, at.UTC().Format(time.RFC3339Nano), next.UTC().Format(time.RFC3339), w)
				require.Equal(t, tc.tz, next.Location().String(), "Next answers in the cron's zone")
				at = next
			}
		})
	}
}

// TestCronNextNone: 29 February falls in no year from 2100 to 2103, beyond
// the five years Next searches from 2097.
func TestCronNextNone(t *testing.T) {
	c, err := ParseCron("0 0 29 2 *", "UTC")
	require.NoError(t, err)
	require.True(t, c.Next(instant(t, "2097-03-01T00:00:00Z")).IsZero())
	require.True(t, c.Next(instant(t, "2095-03-01T00:00:00Z")).Equal(instant(t, "2096-02-29T00:00:00Z")))
}

func TestParseCronErrors(t *testing.T) {
	tests := []struct {
		name, spec, tz string
		is             error
		msg            string
	}{
		{"minute above 59", "61 * * * *", "UTC", ErrInvalidCron, `invalid cron "61 * * * *": end of range (61) above maximum (59): 61`},
		{"three fields", "* * *", "UTC", ErrInvalidCron, `invalid cron "* * *": expected exactly 5 fields, found 3: [* * *]`},
		{"empty spec", "", "UTC", ErrInvalidCron, `invalid cron "": empty spec string`},
		{"CRON_TZ prefix", "CRON_TZ=UTC 0 8 * * *", "UTC", ErrInvalidCron, `invalid cron "CRON_TZ=UTC 0 8 * * *": the zone is the schedule's timezone, not a CRON_TZ= or TZ= prefix`},
		{"TZ prefix alone", "TZ=UTC", "UTC", ErrInvalidCron, `invalid cron "TZ=UTC": the zone is the schedule's timezone, not a CRON_TZ= or TZ= prefix`},
		{"day of week 8", "0 8 * * 8", "UTC", ErrInvalidCron, `invalid cron "0 8 * * 8": end of range (8) above maximum (6): 8`},
		{"@every interval", "@every 1h", "UTC", ErrInvalidCron, `invalid cron "@every 1h": not a wall-clock schedule`},
		{"30 February", "0 0 30 2 *", "UTC", ErrInvalidCron, `invalid cron "0 0 30 2 *": matches no date`},
		{"unknown zone", "0 8 * * *", "Mars/Olympus", ErrInvalidZone, `invalid time zone "Mars/Olympus": unknown time zone Mars/Olympus`},
		{"empty zone", "0 8 * * *", "", ErrInvalidZone, `invalid time zone "": empty`},
		{"Local zone", "0 8 * * *", "Local", ErrInvalidZone, `invalid time zone "Local": the server's local zone is not a schedule's zone`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCron(tc.spec, tc.tz)
			require.ErrorIs(t, err, tc.is)
			other := ErrInvalidZone
			if tc.is == ErrInvalidZone {
				other = ErrInvalidCron
			}
			require.False(t, errors.Is(err, other), "only one of the two")
			require.EqualError(t, err, tc.msg)
		})
	}
}

// TestCronNextProperties walks 2000 firings of several crons in several
// zones, from starts before each northern and southern switch: instants
// strictly increase (so none repeats), and each is the first occurrence of
// a wall time the cron matches or else the end of a gap.
func TestCronNextProperties(t *testing.T) {
	specs := []string{"*/15 * * * *", "30 2 * * *", "0 8 * * 1-5", "@hourly", "*/7 1-3 * * *", "45 1 * * 0"}
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"}
	starts := []time.Time{
		time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 9, 25, 0, 0, 0, 0, time.UTC),
	}
	for _, spec := range specs {
		for _, tz := range zones {
			t.Run(spec+" in "+tz, func(t *testing.T) {
				c, err := ParseCron(spec, tz)
				require.NoError(t, err)
				for _, at := range starts {
					for i := 0; i < 2000; i++ {
						next := c.Next(at)
						require.Truef(t, next.After(at), "Next(%s) = %s", at, next)
						wall := wallClock(next)
						if c.spec.Next(wall.Add(-time.Second)).Equal(wall) {
							require.Truef(t, c.instant(wall).Equal(next), "%s is not the first %s", next, wall)
						} else {
							start, _ := next.ZoneBounds()
							require.Truef(t, start.Equal(next), "%s (%s) matches no wall time and ends no gap", next, wall)
						}
						at = next
					}
				}
			})
		}
	}
}
