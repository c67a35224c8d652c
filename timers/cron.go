package timers

import (
	"errors"
	"fmt"
	"strings"
	"time"

	// Embedded zone database: production images may lack
	// /usr/share/zoneinfo, and a schedule's zone must load anyway.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// ErrInvalidCron and ErrInvalidZone are wrapped by ParseCron's errors
// (errors.Is works), so a caller can tell which field of a schedule to
// reject; the message says what is wrong with it.
var (
	ErrInvalidCron = errors.New("invalid cron")
	ErrInvalidZone = errors.New("invalid time zone")
)

// cronParser reads standard 5-field crons and the @ descriptors; there is no
// seconds field.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron is a parsed 5-field cron read in a time zone. Its zero value is not
// usable: make one with ParseCron.
type Cron struct {
	// spec matches wall-clock times, which Next hands it as times in UTC
	// (a zone without daylight saving).
	spec *cron.SpecSchedule
	loc  *time.Location
}

// ParseCron parses spec (5 fields or a descriptor) in the IANA zone tz
// ("UTC", "Europe/Berlin"). The zone comes from tz only: a spec starting
// with CRON_TZ= or TZ= is refused, and so is tz "Local" (the server's zone
// is not a schedule's) or "" (which time.LoadLocation would read as UTC).
func ParseCron(spec, tz string) (Cron, error) {
	trimmed := strings.TrimSpace(spec)
	if strings.HasPrefix(trimmed, "CRON_TZ=") || strings.HasPrefix(trimmed, "TZ=") {
		return Cron{}, fmt.Errorf("%w %q: the zone is the schedule's timezone, not a CRON_TZ= or TZ= prefix", ErrInvalidCron, spec)
	}
	parsed, err := cronParser.Parse(trimmed)
	if err != nil {
		return Cron{}, fmt.Errorf("%w %q: %v", ErrInvalidCron, spec, err)
	}
	// @every gives a fixed interval, not wall-clock times to match.
	s, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return Cron{}, fmt.Errorf("%w %q: not a wall-clock schedule", ErrInvalidCron, spec)
	}
	// A spec matching no date (30 February) would never arm a timer. Every
	// date that exists at all does so in 2000-2004 (2000 is a leap year).
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Cron{}, fmt.Errorf("%w %q: matches no date", ErrInvalidCron, spec)
	}
	switch tz {
	case "":
		return Cron{}, fmt.Errorf("%w %q: empty", ErrInvalidZone, tz)
	case "Local":
		return Cron{}, fmt.Errorf("%w %q: the server's local zone is not a schedule's zone", ErrInvalidZone, tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Cron{}, fmt.Errorf("%w %q: %v", ErrInvalidZone, tz, err)
	}
	return Cron{spec: s, loc: loc}, nil
}

// Next is the first instant strictly after `after` at which the cron fires,
// in the cron's zone. Matches are wall-clock times: those a daylight-saving
// gap skips fire when the gap ends, once together with the wall time the
// gap ends at, and one that occurs twice fires at its first occurrence
// only. Next returns the zero Time if there is no match within five years
// (a 29 February cron near 2100).
func (c Cron) Next(after time.Time) time.Time {
	wall := wallClock(after.In(c.loc))
	for {
		wall = c.spec.Next(wall)
		if wall.IsZero() {
			return time.Time{}
		}
		// When `after` is in a repeated hour's second pass, the wall
		// times left in that hour map to their first pass, already gone.
		if t := c.instant(wall); t.After(after) {
			return t
		}
	}
}

// instant is the first instant at which the zone's clock reads wall (a
// time in UTC), or the end of the gap wall falls in.
func (c Cron) instant(wall time.Time) time.Time {
	t := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), c.loc)
	// In a gap time.Date reads wall with the offset of one side of it or
	// the other (which one is not guaranteed), so t lands past the gap
	// with a later clock, or before it with an earlier one.
	switch got := wallClock(t); {
	case got.After(wall):
		start, _ := t.ZoneBounds()
		return start
	case got.Before(wall):
		_, end := t.ZoneBounds()
		return end
	}
	// Repeated wall time: the same clock under the previous zone's larger
	// offset is earlier by the offsets' difference (not always an hour:
	// Australia/Lord_Howe moves 30 minutes).
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, offset := t.Zone()
	if before <= offset {
		return t
	}
	if first := t.Add(-time.Duration(before-offset) * time.Second); wallClock(first).Equal(wall) {
		return first
	}
	return t
}

// wallClock is t's clock reading in its zone, as that reading in UTC.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
