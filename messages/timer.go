package messages

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Timer is the durable timer service's domain (docs/timers.md).
const Timer Domain = "timer"

// Timer commands.
var (
	TimerCreate = command[TimerCreatePayload](Timer, "timer.create")
	TimerDelete = command[TimerDeletePayload](Timer, "timer.delete")
	TimerDue    = command[TimerDuePayload](Timer, "timer.due")
)

// Timer events.
var (
	TimerCreated = event[TimerCreatedPayload](Timer, "timer.created")
	TimerDeleted = event[TimerDeletedPayload](Timer, "timer.deleted")
	TimerFired   = event[TimerFiredPayload](Timer, "timer.fired")
	TimerFailed  = event[TimerFailedPayload](Timer, "timer.failed")
)

// Timer limits.
const (
	maxTimerPayload = 64 << 10
	// MaxCallbackTimeout bounds one callback; the command that runs it
	// must outlast it (TRANSIT_COMMAND_TIMEOUT).
	MaxCallbackTimeout     = time.Minute
	defaultCallbackTimeout = 10 * time.Second
	maxTimerHorizon        = 10 * 365 * 24 * time.Hour
)

// Callback schemes. sqs:// and sns:// name a queue or topic of the same
// account and region; the payload is sent to it as the message body.
const (
	CallbackSQS = "sqs"
	CallbackSNS = "sns"
)

var (
	timerIDPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]*$`)
	awsNamePattern  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	idempotencySafe = regexp.MustCompile(`^[\x21-\x7e]+$`)
)

// Duration is a time.Duration written in JSON as a Go duration string
// ("1.5s", "2m").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"1.5s\" or \"2m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// RetryPolicy says how a failing callback is retried: the n-th retry
// waits InitialInterval × Multiplierⁿ⁻¹, at most MaxInterval, until
// MaxAttempts calls were made or the next would start more than
// MaxTotalDuration after the first.
type RetryPolicy struct {
	MaxAttempts      int      `json:"max_attempts,omitempty"`
	MaxTotalDuration Duration `json:"max_total_duration,omitempty"`
	InitialInterval  Duration `json:"initial_interval,omitempty"`
	Multiplier       float64  `json:"multiplier,omitempty"`
	MaxInterval      Duration `json:"max_interval,omitempty"`
}

// DefaultRetryPolicy fills what a timer's policy leaves out.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:      5,
	MaxTotalDuration: Duration(24 * time.Hour),
	InitialInterval:  Duration(time.Second),
	Multiplier:       2,
	MaxInterval:      Duration(5 * time.Minute),
}

func (p *RetryPolicy) setDefaults() {
	d := DefaultRetryPolicy
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MaxTotalDuration == 0 {
		p.MaxTotalDuration = d.MaxTotalDuration
	}
	if p.InitialInterval == 0 {
		p.InitialInterval = d.InitialInterval
	}
	if p.Multiplier == 0 {
		p.Multiplier = d.Multiplier
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = d.MaxInterval
	}
}

func (p *RetryPolicy) validate() error {
	p.setDefaults()
	switch {
	case p.MaxAttempts < 1 || p.MaxAttempts > 1000:
		return invalid("retry_policy.max_attempts", "%d, want 1 to 1000", p.MaxAttempts)
	case p.InitialInterval < 0 || p.MaxInterval < 0 || p.MaxTotalDuration < 0:
		return invalid("retry_policy", "durations must not be negative")
	case p.MaxInterval < p.InitialInterval:
		return invalid("retry_policy.max_interval", "%s is shorter than initial_interval %s",
			time.Duration(p.MaxInterval), time.Duration(p.InitialInterval))
	case p.Multiplier < 1 || p.Multiplier > 100:
		return invalid("retry_policy.multiplier", "%g, want 1 to 100", p.Multiplier)
	}
	return nil
}

// Next is when to call again after the attempts-th call failed at now,
// for a timer first due at first; ok is false when the policy is spent.
func (p RetryPolicy) Next(attempts int, first, now time.Time) (next time.Time, ok bool) {
	if attempts >= p.MaxAttempts {
		return time.Time{}, false
	}
	wait := float64(p.InitialInterval) * math.Pow(p.Multiplier, float64(attempts-1))
	wait = math.Min(wait, float64(p.MaxInterval))
	next = now.Add(time.Duration(wait))
	if next.Sub(first) > time.Duration(p.MaxTotalDuration) {
		return time.Time{}, false
	}
	return next, true
}

// TimerCreatePayload creates a timer, or replaces the timer with the same
// ID (an upsert: the replacement gets a new timer_uuid, so a firing of the
// old one already under way does not delete it).
type TimerCreatePayload struct {
	TimerID string `json:"timer_id"`
	// GroupID is free for the producer, e.g. to find its timers later.
	GroupID   string    `json:"group_id,omitempty"`
	ExecuteAt time.Time `json:"execute_at"`
	// Callback is an http(s) URL to POST the payload to, or sqs://queue or
	// sns://topic to send it as a message.
	Callback string          `json:"callback"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	// CallbackTimeout bounds one call; default 10s, at most 1m.
	CallbackTimeout Duration     `json:"callback_timeout,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
}

func (p *TimerCreatePayload) Validate() error {
	if err := checkTimerID(p.TimerID); err != nil {
		return err
	}
	if err := checkText("group_id", p.GroupID, maxKeyField); err != nil {
		return err
	}
	if p.ExecuteAt.IsZero() {
		return invalid("execute_at", "required")
	}
	if time.Until(p.ExecuteAt) > maxTimerHorizon {
		return invalid("execute_at", "%s is more than 10 years ahead", p.ExecuteAt.Format(time.RFC3339))
	}
	if err := CheckCallback(p.Callback); err != nil {
		return err
	}
	if len(p.Payload) > maxTimerPayload {
		return invalid("payload", "%d bytes, at most %d", len(p.Payload), maxTimerPayload)
	}
	if p.CallbackTimeout == 0 {
		p.CallbackTimeout = Duration(defaultCallbackTimeout)
	}
	if p.CallbackTimeout < 0 || time.Duration(p.CallbackTimeout) > MaxCallbackTimeout {
		return invalid("callback_timeout", "%s, want more than 0 and at most %s", time.Duration(p.CallbackTimeout), MaxCallbackTimeout)
	}
	if p.RetryPolicy == nil {
		p.RetryPolicy = &RetryPolicy{}
	}
	return p.RetryPolicy.validate()
}

// CheckCallback accepts an http(s) URL with a host, sqs://<queue name> or
// sns://<topic name>.
func CheckCallback(v string) error {
	if err := required("callback", v, 2048); err != nil {
		return err
	}
	u, err := url.Parse(v)
	if err != nil {
		return invalid("callback", "%q is not a URL", v)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return invalid("callback", "%q has no host", v)
		}
	case CallbackSQS, CallbackSNS:
		name := strings.TrimPrefix(v, u.Scheme+"://")
		if !awsNamePattern.MatchString(name) {
			return invalid("callback", "%q: want %s://<name>, the name 1-80 letters, digits, '-' or '_'", v, u.Scheme)
		}
	default:
		return invalid("callback", "%q: want an http(s) URL, sqs://queue or sns://topic", v)
	}
	return nil
}

func checkTimerID(v string) error {
	if err := required("timer_id", v, maxKeyField); err != nil {
		return err
	}
	if !timerIDPattern.MatchString(v) {
		return invalid("timer_id", "%q is not an identifier (letters, digits and . _ : @ / -)", v)
	}
	return nil
}

// TimerDeletePayload deletes a timer; deleting one that does not exist
// succeeds.
type TimerDeletePayload struct {
	TimerID string `json:"timer_id"`
}

func (p *TimerDeletePayload) Validate() error { return checkTimerID(p.TimerID) }

// TimerDuePayload says one firing of a timer is due: the timer as it was
// when its shard's owner scheduled it. ExecuteAt tells this firing from a
// later retry of the same timer.
type TimerDuePayload struct {
	Shard     int       `json:"shard"`
	TimerID   string    `json:"timer_id"`
	TimerUUID string    `json:"timer_uuid"`
	ExecuteAt time.Time `json:"execute_at"`
}

func (p *TimerDuePayload) Validate() error {
	if p.Shard < 0 {
		return invalid("shard", "%d, want 0 or more", p.Shard)
	}
	if err := checkTimerID(p.TimerID); err != nil {
		return err
	}
	if err := required("timer_uuid", p.TimerUUID, MaxIDLength); err != nil {
		return err
	}
	if !idempotencySafe.MatchString(p.TimerUUID) {
		return invalid("timer_uuid", "contains spaces or non-ASCII characters")
	}
	if p.ExecuteAt.IsZero() {
		return invalid("execute_at", "required")
	}
	return nil
}

// TimerCreatedPayload reports a stored timer.
type TimerCreatedPayload struct {
	TimerID   string    `json:"timer_id"`
	TimerUUID string    `json:"timer_uuid"`
	GroupID   string    `json:"group_id,omitempty"`
	Shard     int       `json:"shard"`
	ExecuteAt time.Time `json:"execute_at"`
	Callback  string    `json:"callback"`
	// Replaced is the uuid of the timer this one replaced, if any.
	Replaced string `json:"replaced,omitempty"`
}

// TimerDeletedPayload reports a deletion; TimerUUID is empty when there
// was no such timer.
type TimerDeletedPayload struct {
	TimerID   string `json:"timer_id"`
	TimerUUID string `json:"timer_uuid,omitempty"`
	Shard     int    `json:"shard"`
}

// TimerFiredPayload reports a callback that succeeded; ExecuteAt is when
// that call was due (a retry's time, after failures).
type TimerFiredPayload struct {
	TimerID   string    `json:"timer_id"`
	TimerUUID string    `json:"timer_uuid"`
	Shard     int       `json:"shard"`
	ExecuteAt time.Time `json:"execute_at"`
	FiredAt   time.Time `json:"fired_at"`
	Attempts  int       `json:"attempts"`
	// Rescheduled is the next execute time the callback asked for, and
	// NextUUID the uuid the rescheduled timer carries.
	Rescheduled *time.Time `json:"rescheduled,omitempty"`
	NextUUID    string     `json:"next_uuid,omitempty"`
}

// TimerFailedPayload reports a timer whose retry policy is spent; the
// timer is removed. ExecuteAt is when its last call was due.
type TimerFailedPayload struct {
	TimerID   string    `json:"timer_id"`
	TimerUUID string    `json:"timer_uuid"`
	Shard     int       `json:"shard"`
	ExecuteAt time.Time `json:"execute_at"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
}
