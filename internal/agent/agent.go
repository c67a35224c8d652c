// Package agent is transit's reference agent: it leases an org's tasks
// and runs each through a shell command, reporting its output, its
// questions and its end to transit, all through transit's own queues and
// topics (docs/tasks.md). It talks to transit only through a Bus; OpenSQS
// is the real one.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"transit/messages"
)

// Config is what an agent is and does.
type Config struct {
	OrgID, AgentID string
	// Exec is the shell command that works on a task, run with sh -c.
	Exec string
	// Dir is its working directory; default the agent's.
	Dir string
	// Capabilities are announced in leases and heartbeats.
	Capabilities []string
	// Heartbeat is the interval of heartbeats (default 30s); a heartbeat
	// naming the running task renews its lease.
	Heartbeat time.Duration
	// Poll is the wait before leasing again after finding nothing (default 5s).
	Poll time.Duration
	// Once runs one task, or none when there is none, and returns.
	Once bool
	// Timeout bounds the wait for the event a command causes (default
	// 2m); meanwhile the command is sent again, with the same ID, every
	// resendEvery.
	Timeout time.Duration
	// Host, PID and Version are what heartbeats say of the agent; default
	// this host and process, and "dev".
	Host    string
	PID     int
	Version string
	Logger  *slog.Logger
	// Now stamps log lines and commands; default time.Now.
	Now func() time.Time
}

// resendEvery is how long a command waits for its event before it is
// sent again: transit answers a command it applied before with the same
// events, so a lost send or a lost event costs a delay, not the task.
const resendEvery = 20 * time.Second

// sendRetry is the wait before sending again a command that could not
// be sent at all.
const sendRetry = 2 * time.Second

var (
	// errCancelled stops a task its user cancelled: nothing more is reported.
	errCancelled = errors.New("the task was cancelled")
	// errLeaseLost stops a task whose lease ran out: it is someone else's.
	errLeaseLost = errors.New("the lease on the task ran out")
	errBusClosed = errors.New("the bus delivers no more events")
)

// RejectedError is a command of the agent that transit refused.
type RejectedError struct {
	messages.TaskRejectedPayload
}

func (e *RejectedError) Error() string {
	if e.TaskID != "" {
		return fmt.Sprintf("%s of task %s rejected: %s", e.Command, e.TaskID, e.Reason)
	}
	return fmt.Sprintf("%s rejected: %s", e.Command, e.Reason)
}

// Agent leases and runs tasks. Run it once.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	limits limits
	// resend is resendEvery, shorter in tests.
	resend time.Duration

	bus   Bus
	inbox *inbox
	// current is the task being run, for the heartbeats.
	current atomic.Pointer[messages.TaskLeasedPayload]
}

// New checks the configuration and fills in its defaults.
func New(cfg Config) (*Agent, error) {
	if cfg.Exec == "" {
		return nil, errors.New("no command to run tasks with (--exec)")
	}
	if cfg.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		cfg.Dir = wd
	}
	if fi, err := os.Stat(cfg.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("working directory %s: not a directory (%v)", cfg.Dir, err)
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	cfg.Version = orDefault(cfg.Version, "dev")
	cfg.Heartbeat = orDefault(cfg.Heartbeat, 30*time.Second)
	cfg.Poll = orDefault(cfg.Poll, 5*time.Second)
	cfg.Timeout = orDefault(cfg.Timeout, 2*time.Minute)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("org_id", cfg.OrgID, "agent_id", cfg.AgentID), resend: resendEvery}
	// What transit would refuse, refused now: the IDs, the capabilities,
	// what heartbeats say.
	hb := a.heartbeatPayload()
	if err := first((&messages.TaskLeasePayload{OrgID: cfg.OrgID, AgentID: cfg.AgentID, Capabilities: cfg.Capabilities}).Validate(), hb.Validate()); err != nil {
		return nil, err
	}
	var err error
	if a.limits, err = progressLimits(); err != nil {
		return nil, err
	}
	return a, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Run sends heartbeats and leases tasks, running each, until ctx ends
// (nil then), the bus closes or, with Once, after one task: its error is
// then Run's, a cancelled task being no error. Without Once, a task found
// cancelled, refused or no longer leased is left as it is and another
// lease follows.
func (a *Agent) Run(ctx context.Context, bus Bus) error {
	a.bus, a.inbox = bus, newInbox(a.log)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() { a.inbox.pump(ctx, bus.Events()) })
	// Online before the first lease: whoever watches the org sees who
	// takes its work.
	a.heartbeat(ctx)
	wg.Go(func() { a.heartbeats(ctx) })
	for {
		task, leased, err := a.lease(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && (a.cfg.Once || errors.Is(err, errBusClosed)):
			return err
		case err != nil:
			a.log.Error("agent: lease failed", "error", err)
		case leased:
			err := a.runTask(ctx, task)
			switch {
			case ctx.Err() != nil:
				return nil
			case a.cfg.Once || errors.Is(err, errBusClosed):
				return err
			}
			// The next task at once: there may be more waiting.
			continue
		case a.cfg.Once:
			a.log.Info("agent: nothing to lease")
			return nil
		}
		select {
		case <-time.After(a.cfg.Poll):
		case <-ctx.Done():
			return nil
		}
	}
}

// lease asks for a task: leased, or nothing to lease.
func (a *Agent) lease(ctx context.Context) (messages.TaskLeasedPayload, bool, error) {
	env, err := a.call(ctx, messages.TaskLease, "", &messages.TaskLeasePayload{OrgID: a.cfg.OrgID, AgentID: a.cfg.AgentID, Capabilities: a.cfg.Capabilities}, nil, nil)
	if err != nil {
		return messages.TaskLeasedPayload{}, false, err
	}
	switch env.Type {
	case messages.TaskLeased:
		var task messages.TaskLeasedPayload
		if err := json.Unmarshal(env.Payload, &task); err != nil {
			return task, false, fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err)
		}
		return task, true, nil
	case messages.TaskLeaseEmpty:
		return messages.TaskLeasedPayload{}, false, nil
	}
	return messages.TaskLeasedPayload{}, false, fmt.Errorf("%s answered with %s", messages.TaskLease, env.Type)
}

func (a *Agent) heartbeats(ctx context.Context) {
	tick := time.NewTicker(a.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			a.heartbeat(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// heartbeat says the agent is online and, while it runs a task, renews
// the task's lease. Nothing answers a heartbeat but a refusal, so it is
// sent and not waited on; a lost one is made up for by the next.
func (a *Agent) heartbeat(ctx context.Context) {
	p := a.heartbeatPayload()
	body, err := a.body(uuid.NewString(), "", messages.AgentHeartbeat, &p)
	if err == nil {
		err = a.bus.Send(ctx, messages.AgentHeartbeat, body)
	}
	if err != nil && ctx.Err() == nil {
		a.log.Warn("agent: heartbeat not sent", "error", err)
	}
}

func (a *Agent) heartbeatPayload() messages.AgentHeartbeatPayload {
	p := messages.AgentHeartbeatPayload{OrgID: a.cfg.OrgID, AgentID: a.cfg.AgentID, Host: a.cfg.Host, PID: a.cfg.PID,
		Cwd: a.cfg.Dir, Version: a.cfg.Version, Capabilities: a.cfg.Capabilities, CanInteractive: true}
	if t := a.current.Load(); t != nil {
		p.CurrentTaskID, p.CurrentProjectID = t.TaskID, t.ProjectID
	}
	return p
}

// body is a command's envelope: messages.NewCommand's, with the
// correlation ID of the task it is about, so the task's events share it
// (docs/tasks.md, "Subscribing as an agent"). The payload is checked as
// transit will check it: one transit would refuse is dead-lettered
// without an event, which the agent would wait for in vain.
func (a *Agent) body(id, correlationID string, t messages.Type, payload any) ([]byte, error) {
	if v, ok := payload.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
	}
	body, err := messages.NewCommand(id, t, payload, a.cfg.Now())
	if err != nil || correlationID == "" {
		return body, err
	}
	var env messages.Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	env.CorrelationID = correlationID
	return json.Marshal(env)
}

// call sends a command with a new ID and waits for the event it causes:
// returned, or as a *RejectedError when transit refused the command.
// Meanwhile events from side are given to onSide, whose error ends the
// wait. The command is sent again with the same ID while no event comes,
// until the timeout.
func (a *Agent) call(ctx context.Context, t messages.Type, correlationID string, payload any, side <-chan messages.Envelope, onSide func(messages.Envelope) error) (messages.Envelope, error) {
	id := uuid.NewString()
	body, err := a.body(id, correlationID, t, payload)
	if err != nil {
		return messages.Envelope{}, err
	}
	result := a.inbox.expect(id)
	defer a.inbox.forget(id)
	deadline := time.NewTimer(a.cfg.Timeout)
	defer deadline.Stop()
	var sendErr error
	for sent := 0; ; sent++ {
		wait := a.resend
		if sendErr = a.bus.Send(ctx, t, body); sendErr != nil {
			if ctx.Err() != nil {
				return messages.Envelope{}, ctx.Err()
			}
			a.log.Warn("agent: command not sent, trying again", "type", t, "id", id, "error", sendErr)
			wait = sendRetry
		} else if sent > 0 {
			a.log.Warn("agent: no event for a command yet, sent it again", "type", t, "id", id)
		}
		again := time.NewTimer(wait)
		for waiting := true; waiting; {
			select {
			case env := <-result:
				again.Stop()
				if env.Type == messages.TaskRejected {
					rej := &RejectedError{}
					if err := json.Unmarshal(env.Payload, &rej.TaskRejectedPayload); err != nil {
						return env, fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err)
					}
					return env, rej
				}
				return env, nil
			case env := <-side:
				if err := onSide(env); err != nil {
					again.Stop()
					return messages.Envelope{}, err
				}
			case <-again.C:
				waiting = false
			case <-deadline.C:
				again.Stop()
				if sendErr != nil {
					return messages.Envelope{}, fmt.Errorf("%s %s: not sent within %s: %w", t, id, a.cfg.Timeout, sendErr)
				}
				return messages.Envelope{}, fmt.Errorf("%s %s: no event within %s (is transit serving the task domain?)", t, id, a.cfg.Timeout)
			case <-a.inbox.closed:
				again.Stop()
				return messages.Envelope{}, errBusClosed
			case <-ctx.Done():
				again.Stop()
				return messages.Envelope{}, ctx.Err()
			}
		}
	}
}
