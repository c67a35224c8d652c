package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"transit/messages"
)

// run is one leased task being run: the command's process, its output
// waiting to be reported, and the question it waits on. One goroutine
// (report) sends the task's commands one at a time, each after the
// event of the one before: transit handles a queue's commands
// concurrently, so only thus do its lines, question and end arrive in
// the order they happened.
type run struct {
	a      *Agent
	task   messages.TaskLeasedPayload
	log    *slog.Logger
	events <-chan messages.Envelope
	out    *output
	proc   *process
	// asking is the question asked and not yet answered.
	asking string
}

// runTask runs a leased task to its end. A cancelled task is no error; a
// refused command, a lost lease or a stopped agent is, and leaves the
// task as it is (after its lease runs out transit queues it again).
func (a *Agent) runTask(ctx context.Context, task messages.TaskLeasedPayload) error {
	log := a.log.With("task_id", task.TaskID)
	log.Info("agent: leased a task", "title", task.Title, "project_id", task.ProjectID, "attempt", task.Attempts)
	r := &run{a: a, task: task, log: log, events: a.inbox.watch(task.TaskID), out: newOutput(a.limits, a.cfg.Now)}
	defer a.inbox.unwatch()
	a.current.Store(&task)
	defer a.current.Store(nil)
	err := r.run(ctx)
	var rej *RejectedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errCancelled):
		log.Info("agent: the task was cancelled; its command is killed")
		return nil
	case ctx.Err() != nil:
		log.Warn("agent: stopped while running a task; it stays leased until its lease runs out, then transit queues it again")
	case errors.As(err, &rej):
		log.Error("agent: transit rejected a command; the task is no longer run", "command", rej.Command, "reason", rej.Reason)
	default:
		log.Error("agent: stopped running the task", "error", err)
	}
	return fmt.Errorf("task %s: %w", task.TaskID, err)
}

func (r *run) run(ctx context.Context) error {
	if _, err := r.call(ctx, messages.TaskStart, &messages.TaskAgentPayload{OrgID: r.task.OrgID, TaskID: r.task.TaskID, AgentID: r.a.cfg.AgentID}); err != nil {
		return err
	}
	proc, err := startProcess(r.a.cfg.Exec, r.a.cfg.Dir, r.task, r.out)
	if err != nil {
		_, failErr := r.call(ctx, messages.TaskFail, &messages.TaskErrorPayload{TaskAgentPayload: r.agentPayload(), Error: err.Error()})
		return errors.Join(err, failErr)
	}
	r.proc = proc
	if err := r.report(ctx); err != nil {
		proc.kill()
		return err
	}
	return nil
}

// call sends a command about the task and waits for its event, taking
// the task's other events meanwhile.
func (r *run) call(ctx context.Context, t messages.Type, payload any) (messages.Envelope, error) {
	return r.a.call(ctx, t, r.task.CorrelationID, payload, r.events, r.handle)
}

func (r *run) agentPayload() messages.TaskAgentPayload {
	return messages.TaskAgentPayload{OrgID: r.task.OrgID, TaskID: r.task.TaskID, AgentID: r.a.cfg.AgentID}
}

// report sends the command's output, asks its questions, hands it the
// answers and reports its end. Lines are sent when a command's worth is
// waiting, when the oldest has waited flushEvery, when a question
// follows them, and when the command has exited.
func (r *run) report(ctx context.Context) error {
	var exited <-chan struct{} = r.proc.done
	ended := false
	for {
		n, since := r.out.waiting()
		q, asked, pending := r.out.question()
		// One question at a time: transit takes a question only from a
		// running task, not one awaiting an answer. None after the end.
		canAsk := pending && r.asking == "" && !ended
		switch {
		case n > 0 && (n >= r.out.limits.Lines || ended || (canAsk && !asked) || time.Since(since) >= flushEvery):
			lines := r.out.take()
			if _, err := r.call(ctx, messages.TaskProgress, &messages.TaskProgressPayload{TaskAgentPayload: r.agentPayload(), Lines: lines}); err != nil {
				return err
			}
			continue
		case canAsk && asked:
			r.out.asked()
			r.asking = q.text
			r.log.Info("agent: the command asks", "question", q.text)
			if _, err := r.call(ctx, messages.TaskAwaitResponse, &messages.TaskQuestionPayload{TaskAgentPayload: r.agentPayload(), Question: q.text}); err != nil {
				return err
			}
			continue
		case ended && n == 0:
			return r.finish(ctx)
		}
		flush := time.NewTimer(flushEvery - time.Since(since))
		if n == 0 {
			flush.Stop()
		}
		err := r.wait(ctx, flush.C, &exited, &ended)
		flush.Stop()
		if err != nil {
			return err
		}
	}
}

// wait waits for something to report: a line, the time to flush, the
// command's exit, an event about the task.
func (r *run) wait(ctx context.Context, flush <-chan time.Time, exited *<-chan struct{}, ended *bool) error {
	select {
	case <-r.out.notify:
	case <-flush:
	case <-*exited:
		// Every line is in out by now: exec's copying is done.
		*ended, *exited = true, nil
	case env := <-r.events:
		return r.handle(env)
	case <-r.a.inbox.closed:
		return errBusClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// handle takes an event about the task that no command of the agent
// caused: an answer goes to the command's stdin; a cancellation, a lost
// lease or a refusal ends the run.
func (r *run) handle(env messages.Envelope) error {
	switch env.Type {
	case messages.TaskResponseReceived:
		var p messages.TaskChangedPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err)
		}
		if r.asking == "" || r.proc == nil {
			r.log.Warn("agent: an answer to no question, ignored", "by", p.By)
			return nil
		}
		r.log.Info("agent: the question is answered", "by", p.By)
		r.asking = ""
		// At most one answer is ever on its way: one question at a time.
		r.proc.answers <- p.Response
	case messages.TaskCancelled:
		return errCancelled
	case messages.TaskRequeued, messages.TaskStuck:
		return fmt.Errorf("%w (%s)", errLeaseLost, env.Type)
	case messages.TaskRejected:
		rej := &RejectedError{}
		if err := json.Unmarshal(env.Payload, &rej.TaskRejectedPayload); err != nil {
			return fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err)
		}
		return rej
	}
	return nil
}

// finish reports how the command ended: completed with its last stdout
// line on exit status 0, failed with the status and its last stderr line
// otherwise. A command that exits while its question waits for an answer
// has failed: transit completes only a running task.
func (r *run) finish(ctx context.Context) error {
	for _, q := range r.out.unasked() {
		r.log.Warn("agent: the command exited before its question was asked", "question", q.text)
	}
	status, code := r.proc.status()
	r.log.Info("agent: the command exited", "status", status)
	if code == 0 && r.asking == "" {
		result := cmp.Or(r.out.lastNonEmpty(stdout), "exit 0")
		_, err := r.call(ctx, messages.TaskComplete, &messages.TaskResultPayload{TaskAgentPayload: r.agentPayload(), Result: result})
		return err
	}
	reason := status
	if r.asking != "" {
		reason += " while awaiting a response to: " + r.asking
	} else if last := r.out.lastNonEmpty(stderr); last != "" {
		reason += ": " + last
	}
	_, err := r.call(ctx, messages.TaskFail, &messages.TaskErrorPayload{TaskAgentPayload: r.agentPayload(), Error: reason})
	return err
}
