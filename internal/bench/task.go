package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"

	"transit/internal/metering"
	"transit/machine"
	"transit/messages"
	"transit/service"
	"transit/store"
)

// The task case's org: an owner who made it, a member who queues the
// tasks, one project.
const (
	taskOrg     = "bench"
	taskOwner   = "u-owner"
	taskMember  = "u-dev"
	taskProject = "p-bench"
)

// taskStall is how long agents may be answered task.lease-empty while
// tasks remain unleased before the case fails: a task no agent can take.
const taskStall = 30 * time.Second

// TaskCase is the task lease case: agents leasing every queued task of
// one org, through transit and through the baseline.
type TaskCase struct {
	Agents   int        `json:"agents"`
	Tasks    int        `json:"tasks"`
	Baseline TaskResult `json:"baseline"`
	Transit  TaskResult `json:"transit"`
	// Ratios are transit's figures over the baseline's.
	Ratios struct {
		PerSecond float64 `json:"leases_per_second"`
		P50       float64 `json:"latency_p50"`
		P99       float64 `json:"latency_p99"`
	} `json:"ratios"`
}

// TaskResult is one role leasing the tasks.
type TaskResult struct {
	Role string `json:"role"`
	// Leases are the measured leases: every task but the warm-up's.
	Leases    int           `json:"leases"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"leases_per_second"`
	// P50 and P99 are the latency of a lease that got a task: task.lease
	// sent to its task.leased seen on the topic.
	P50 time.Duration `json:"latency_p50_ns"`
	P99 time.Duration `json:"latency_p99_ns"`
	// Empty counts task.lease-empty answers in the measurement: agents
	// that found every task left taken by the time they tried it.
	Empty int             `json:"empty_answers"`
	Cost  metering.Report `json:"cost"`
}

// runTaskCase measures the baseline, then transit, each on a stack of its own.
func runTaskCase(ctx context.Context, o Options) (TaskCase, error) {
	tc := TaskCase{Agents: o.Agents, Tasks: o.Tasks}
	for _, role := range []string{RoleBaseline, RoleTransit} {
		r, err := runLeases(ctx, o, role)
		if err != nil {
			return tc, fmt.Errorf("%s: %w", role, err)
		}
		if role == RoleTransit {
			tc.Transit = r
		} else {
			tc.Baseline = r
		}
	}
	frac := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	tc.Ratios.PerSecond = frac(tc.Transit.PerSecond, tc.Baseline.PerSecond)
	tc.Ratios.P50 = frac(float64(tc.Transit.P50), float64(tc.Baseline.P50))
	tc.Ratios.P99 = frac(float64(tc.Transit.P99), float64(tc.Baseline.P99))
	return tc, nil
}

// runLeases seeds an org with o.Tasks tasks plus one per agent, starts
// the role's process at concurrency o.Agents, warms it up with one lease
// per agent, then measures o.Agents agents, each a closed loop of
// task.lease and its answer, until every task is leased; and checks that
// every task was leased exactly once.
func runLeases(ctx context.Context, o Options, role string) (TaskResult, error) {
	res := TaskResult{Role: role}
	prefix := fmt.Sprintf("bk%s-%s", role[:1], uuid.NewString()[:6])
	svc, err := provisioned(ctx, prefix)
	if err != nil {
		return res, err
	}
	ids, err := seedTasks(ctx, svc, o.Tasks+o.Agents)
	if err != nil {
		return res, err
	}
	st, err := openStack(ctx, svc, messages.Task)
	if err != nil {
		return res, err
	}
	defer st.close(ctx)
	w, err := startWorker(o.Executable, o.OutDir, role, prefix, o.Agents, nil, "--domains", string(messages.Task))
	if err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = w.cmd.Process.Kill()
		}
	}()
	ag := &agents{st: st, total: len(ids), leasedBy: map[string][]string{}}
	if err := ag.warm(ctx, o.Agents); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	start, err := w.mark()
	if err != nil {
		return res, err
	}
	warmLeased, warmEmpty := ag.leased.Load(), ag.empty.Load()
	began := time.Now()
	lat, err := ag.drain(ctx, o.Agents)
	if err != nil {
		return res, err
	}
	res.Elapsed = time.Since(began)
	end, err := w.stop()
	stopped = true
	if err != nil {
		return res, err
	}
	if err := ag.check(ctx, svc, ids); err != nil {
		return res, fmt.Errorf("correctness: %w", err)
	}
	res.Leases = int(ag.leased.Load() - warmLeased)
	res.Empty = int(ag.empty.Load() - warmEmpty)
	res.PerSecond = float64(res.Leases) / res.Elapsed.Seconds()
	res.P50, res.P99 = quantile(lat, 0.5), quantile(lat, 0.99)
	res.Cost = end.Minus(start)
	return res, nil
}

// seedTasks creates the org, its owner and member and the project, and
// queues n tasks with priorities spread over 0 to 100, through the
// store, four writers at a time; it returns the tasks' IDs.
func seedTasks(ctx context.Context, svc *service.Service, n int) ([]string, error) {
	cmd := func(t messages.Type) store.Cmd {
		return store.Cmd{ID: uuid.NewString(), Type: string(t), CorrelationID: "bench", At: time.Now()}
	}
	org := messages.OrgCreatePayload{OrgID: taskOrg, Name: "Bench", Actor: "system"}
	if err := org.Validate(); err != nil {
		return nil, err
	}
	if _, err := svc.Store.CreateOrg(ctx, cmd(messages.OrgCreate), org); err != nil {
		return nil, fmt.Errorf("seed org: %w", err)
	}
	// Nobody signs in: the cheapest hash will do.
	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse battery"), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	for _, u := range []struct{ id, role string }{{taskOwner, messages.RoleOwner}, {taskMember, messages.RoleMember}} {
		p := messages.UserRegisterPayload{OrgID: taskOrg, UserID: u.id, Email: u.id + "@bench.test", Password: "correct horse battery",
			DisplayName: u.id, Role: u.role, Actor: "system"}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if _, err := svc.Store.RegisterUser(ctx, cmd(messages.UserRegister), p, string(hash)); err != nil {
			return nil, fmt.Errorf("seed user %s: %w", u.id, err)
		}
	}
	project := messages.ProjectCreatePayload{OrgID: taskOrg, ProjectID: taskProject, Name: "Bench", DefaultModel: "claude-sonnet-4",
		Actor: messages.Actor("user:" + taskOwner)}
	if err := project.Validate(); err != nil {
		return nil, err
	}
	if _, err := svc.Store.CreateProject(ctx, cmd(messages.ProjectCreate), project); err != nil {
		return nil, fmt.Errorf("seed project: %w", err)
	}
	ids := make([]string, n)
	work := make(chan int)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range work {
				ids[i] = fmt.Sprintf("t-%05d", i)
				// 37 and 101 are coprime: every priority, evenly mixed.
				priority := (i * 37) % 101
				p := messages.TaskQueuePayload{OrgID: taskOrg, TaskID: ids[i], ProjectID: taskProject, Priority: &priority,
					Prompt: fmt.Sprintf("bench task %d\nat priority %d", i, priority), Actor: messages.Actor("user:" + taskMember)}
				err := p.Validate()
				if err == nil {
					_, err = svc.Store.QueueTask(ctx, cmd(messages.TaskQueue), p)
				}
				if err != nil {
					select {
					case errs <- fmt.Errorf("seed task %s: %w", ids[i], err):
					default:
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return ids, <-errs
}

// agents lease the org's tasks through the stack, each a closed loop.
type agents struct {
	st    *stack
	total int

	leased, empty atomic.Int64
	// progress is when a lease last got a task (Unix nanoseconds).
	progress atomic.Int64

	mu sync.Mutex
	// leasedBy lists, per task, the agents told task.leased for it.
	leasedBy map[string][]string
}

func agentID(i int) string { return fmt.Sprintf("agent-%02d", i) }

// lease sends one task.lease for agent and waits for its answer; took
// is the time from send to the event when it got a task.
func (a *agents) lease(ctx context.Context, agent string) (got bool, took time.Duration, err error) {
	began := time.Now()
	ev, err := a.st.do(ctx, messages.TaskLease, messages.TaskLeasePayload{OrgID: taskOrg, AgentID: agent})
	if err != nil {
		return false, 0, err
	}
	took = time.Since(began)
	switch ev.Envelope.Type {
	case messages.TaskLeased:
		var p messages.TaskLeasedPayload
		if err := json.Unmarshal(ev.Envelope.Payload, &p); err != nil {
			return false, 0, err
		}
		if p.AgentID != agent || p.OrgID != taskOrg {
			return false, 0, fmt.Errorf("task.lease by %s answered a lease of %s in org %s", agent, p.AgentID, p.OrgID)
		}
		a.mu.Lock()
		a.leasedBy[p.TaskID] = append(a.leasedBy[p.TaskID], agent)
		a.mu.Unlock()
		a.leased.Add(1)
		a.progress.Store(time.Now().UnixNano())
		return true, took, nil
	case messages.TaskLeaseEmpty:
		a.empty.Add(1)
		return false, took, nil
	default:
		return false, 0, fmt.Errorf("task.lease by %s answered %s: %s", agent, ev.Envelope.Type, ev.Envelope.Payload)
	}
}

// warm sends one task.lease per agent, all at once.
func (a *agents) warm(ctx context.Context, n int) error {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, _, err := a.lease(ctx, agentID(i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// drain runs n agents until every task is leased and returns the
// latencies of the leases that got a task. An agent answered
// task.lease-empty asks again while tasks remain; when none has been
// leased for taskStall, the case fails.
func (a *agents) drain(ctx context.Context, n int) ([]time.Duration, error) {
	a.progress.Store(time.Now().UnixNano())
	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			for ctx.Err() == nil && int(a.leased.Load()) < a.total {
				got, took, err := a.lease(ctx, agentID(i))
				if err != nil {
					errs <- err
					return
				}
				if got {
					mu.Lock()
					lat = append(lat, took)
					mu.Unlock()
					continue
				}
				if idle := time.Since(time.Unix(0, a.progress.Load())); idle > taskStall {
					errs <- fmt.Errorf("%d of %d tasks never leased: agents answered task.lease-empty for %s", a.total-int(a.leased.Load()), a.total, idle.Round(time.Second))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return lat, ctx.Err()
}

// check holds every task leased exactly once: the events named each
// seeded task once, and the store has each LEASED by that agent, its
// queue item leased once by it and out of the ready-index.
func (a *agents) check(ctx context.Context, svc *service.Service, ids []string) error {
	var problems []string
	a.mu.Lock()
	for task, by := range a.leasedBy {
		if len(by) != 1 {
			problems = append(problems, fmt.Sprintf("task %s leased %d times, to %s", task, len(by), strings.Join(by, ", ")))
		}
	}
	for _, id := range ids {
		if _, ok := a.leasedBy[id]; !ok {
			problems = append(problems, fmt.Sprintf("task %s never leased", id))
		}
	}
	if len(a.leasedBy) != len(ids) {
		problems = append(problems, fmt.Sprintf("%d tasks leased, %d seeded", len(a.leasedBy), len(ids)))
	}
	owner := make(map[string]string, len(a.leasedBy))
	for task, by := range a.leasedBy {
		owner[task] = by[0]
	}
	a.mu.Unlock()

	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range work {
				t, found, err := svc.Store.GetTask(ctx, taskOrg, id)
				mu.Lock()
				switch {
				case err != nil:
					problems = append(problems, fmt.Sprintf("read task %s: %v", id, err))
				case !found:
					problems = append(problems, fmt.Sprintf("task %s missing from the store", id))
				case t.State != machine.TaskLeased || t.AgentID != owner[id]:
					problems = append(problems, fmt.Sprintf("task %s is %s by %q in the store, leased to %q by its event", id, t.State, t.AgentID, owner[id]))
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()

	items, err := queueItems(ctx, svc)
	if err != nil {
		return err
	}
	for _, q := range items {
		if q.Attempts != 1 || q.LeaseOwner != owner[q.TaskID] || q.ReadyKey != "" {
			problems = append(problems, fmt.Sprintf("queue item of %s: %d attempts, owner %q (its event: %q), ready key %q",
				q.TaskID, q.Attempts, q.LeaseOwner, owner[q.TaskID], q.ReadyKey))
		}
	}
	if len(items) != len(ids) {
		problems = append(problems, fmt.Sprintf("%d queue items, %d tasks", len(items), len(ids)))
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	if len(problems) > 20 {
		problems = append(slices.Clip(problems[:20]), fmt.Sprintf("and %d more", len(problems)-20))
	}
	return errors.New(strings.Join(problems, "; "))
}

// queueItems reads the org's queue items, consistently.
func queueItems(ctx context.Context, svc *service.Service) ([]store.QueueItem, error) {
	kc := expression.Key("PK").Equal(expression.Value("ORG#" + taskOrg)).And(expression.Key("SK").BeginsWith("QUEUE#"))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	pages := dynamodb.NewQueryPaginator(svc.DynamoDB, &dynamodb.QueryInput{
		TableName: aws.String(store.TableName(svc.Config.Prefix, store.Queue)), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var items []store.QueueItem
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read queue items: %w", err)
		}
		var more []store.QueueItem
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &more); err != nil {
			return nil, err
		}
		items = append(items, more...)
	}
	return items, nil
}
