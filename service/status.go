package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"transit/config"
	"transit/messages"
	"transit/store"
	"transit/streams"
	"transit/transport"
)

// This file is `transit status`: one look at a stack's queues, dead
// letters, timer shards and stream leases, and the last minute's counts
// of a running serve, which keeps them for it (/status).

// Counts is what a serve's deliveries of one domain came to over a
// window (metrics.Metrics: handled includes rejected).
type Counts struct {
	Handled  float64 `json:"handled"`
	Rejected float64 `json:"rejected"`
	Failed   float64 `json:"failed"`
}

// ServeStatus is a running serve's answer on /status.
type ServeStatus struct {
	// Host and PID name the replica that answered; every replica counts
	// only its own deliveries.
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Window is how far back the counts go: a minute, or less while
	// serve has run for less.
	Window  time.Duration              `json:"window"`
	Domains map[messages.Domain]Counts `json:"domains"`
}

// countWindow keeps a minute of a serve's counters, sampled every
// countEvery: Prometheus counters only ever grow, so the last minute is
// the difference between now and a minute ago.
type countWindow struct {
	gatherer prometheus.Gatherer
	host     string

	mu      sync.Mutex
	samples []countSample // oldest first
}

type countSample struct {
	at     time.Time
	counts map[messages.Domain]Counts
}

const (
	countWindowSpan = time.Minute
	countEvery      = 5 * time.Second
)

// newCountWindow takes its first sample at once, so the window starts
// with serve.
func newCountWindow(g prometheus.Gatherer) *countWindow {
	host, _ := os.Hostname()
	w := &countWindow{gatherer: g, host: host}
	w.sample(time.Now())
	return w
}

// run samples until ctx ends.
func (w *countWindow) run(ctx context.Context) {
	tick := time.NewTicker(countEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			w.sample(now)
		}
	}
}

// sample adds the counters as they are at now, and drops the samples no
// window ending now or later needs: all but the newest at least a window
// old.
func (w *countWindow) sample(now time.Time) countSample {
	s := countSample{at: now, counts: w.gather()}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples = append(w.samples, s)
	old := 0
	for i, prev := range w.samples {
		if now.Sub(prev.at) >= countWindowSpan {
			old = i
		}
	}
	w.samples = w.samples[old:]
	return s
}

// status is the last window: the counters now, less the newest sample at
// least a window old (the oldest one while serve is younger).
func (w *countWindow) status(now time.Time) ServeStatus {
	cur := countSample{at: now, counts: w.gather()}
	w.mu.Lock()
	base := w.samples[0]
	for _, s := range w.samples {
		if now.Sub(s.at) >= countWindowSpan {
			base = s
		}
	}
	w.mu.Unlock()
	out := ServeStatus{Host: w.host, PID: os.Getpid(), Window: now.Sub(base.at).Round(time.Second), Domains: map[messages.Domain]Counts{}}
	for d, c := range cur.counts {
		b := base.counts[d]
		out.Domains[d] = Counts{Handled: c.Handled - b.Handled, Rejected: c.Rejected - b.Rejected, Failed: c.Failed - b.Failed}
	}
	return out
}

// countOf says which of Counts' fields each counter adds to.
var countOf = map[string]func(*Counts) *float64{
	"transit_messages_handled_total":  func(c *Counts) *float64 { return &c.Handled },
	"transit_commands_rejected_total": func(c *Counts) *float64 { return &c.Rejected },
	"transit_messages_failed_total":   func(c *Counts) *float64 { return &c.Failed },
}

// gather sums the delivery counters by domain; a gathering error leaves
// what it could not read at zero.
func (w *countWindow) gather() map[messages.Domain]Counts {
	families, _ := w.gatherer.Gather()
	counts := map[messages.Domain]Counts{}
	for _, f := range families {
		field, ok := countOf[f.GetName()]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			var d messages.Domain
			for _, l := range m.GetLabel() {
				if l.GetName() == "domain" {
					d = messages.Domain(l.GetValue())
				}
			}
			c := counts[d]
			*field(&c) += m.GetCounter().GetValue()
			counts[d] = c
		}
	}
	return counts
}

// ServeHTTP answers /status.
func (w *countWindow) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(w.status(time.Now()))
}

// Status is one look at a stack.
type Status struct {
	Domains []DomainStatus `json:"domains"`
	// TimerShards counts the timer shards each owner holds; "" counts
	// those nobody holds (never claimed, released, or lapsed).
	TimerShards map[string]int `json:"timer_shards"`
	// StreamLeases counts the fan-in's stream shard leases each owner
	// holds, across the stack's streams.
	StreamLeases map[string]int `json:"stream_leases"`
	// ServeAddr is the serve asked for its counts; Serve its answer, or
	// ServeError why there is none.
	ServeAddr  string       `json:"serve_addr"`
	Serve      *ServeStatus `json:"serve,omitempty"`
	ServeError string       `json:"serve_error,omitempty"`
}

// DomainStatus is one served domain's queues.
type DomainStatus struct {
	Domain messages.Domain `json:"domain"`
	// Queued and InFlight are the command queue's approximate visible and
	// received-but-not-deleted counts.
	Queued   int `json:"queued"`
	InFlight int `json:"in_flight"`
	// DeadLetters is the DLQ's approximate count, visible or not.
	DeadLetters int `json:"dead_letters"`
	// Oldest is the oldest of the dead letters read (at most
	// deadLetterPeek), nil when none was.
	Oldest *DeadLetterSummary `json:"oldest,omitempty"`
}

// DeadLetterSummary is what status shows of a dead letter: never its
// body, which may hold a secret (a secret.stored's value).
type DeadLetterSummary struct {
	MessageID string        `json:"message_id"`
	Type      messages.Type `json:"type"`
	Reason    string        `json:"reason"`
	SentAt    time.Time     `json:"sent_at"`
}

// fanInGroup is the stream fan-in's consumer group: its leases are the
// ones serve's replicas share.
const fanInGroup = "fan-in"

// deadLetterPeek bounds how many dead letters status reads to find the
// oldest: past it, the oldest of those read.
const deadLetterPeek = 100

// Status reads every served domain's queues and DLQ, the owners of the
// timer shards and stream leases, and asks the serve at addr (host:port,
// :port meaning this host) for its last minute's counts. A serve that
// does not answer is reported in ServeError; the rest is read all the
// same. With peek, each DLQ that has messages is read (OldestDeadLetter)
// to name its oldest.
func (s *Service) Status(ctx context.Context, addr string, peek bool) (Status, error) {
	served, err := servedDomains(s.Config.Domains)
	if err != nil {
		return Status{}, err
	}
	st := Status{ServeAddr: addr}
	for _, d := range messages.Domains() {
		if !served[d] {
			continue
		}
		ds, err := s.domainStatus(ctx, d, peek)
		if err != nil {
			return Status{}, err
		}
		st.Domains = append(st.Domains, ds)
	}
	if st.TimerShards, err = s.shardOwners(ctx); err != nil {
		return Status{}, err
	}
	if st.StreamLeases, err = s.leaseOwners(ctx); err != nil {
		return Status{}, err
	}
	if addr == "" || addr == config.HTTPOff {
		st.ServeError = "no address to ask (TRANSIT_HTTP_ADDR is off; give --addr)"
	} else if st.Serve, err = serveStatus(ctx, addr); err != nil {
		st.ServeError = err.Error()
	}
	return st, nil
}

func (s *Service) domainStatus(ctx context.Context, d messages.Domain, peek bool) (DomainStatus, error) {
	ds := DomainStatus{Domain: d}
	queue, err := s.QueueURL(ctx, s.Stack.CommandQueue(d))
	if err != nil {
		return DomainStatus{}, err
	}
	if ds.Queued, ds.InFlight, err = s.queueCounts(ctx, queue); err != nil {
		return DomainStatus{}, err
	}
	dlq, err := s.QueueURL(ctx, s.Stack.DeadLetterQueue(d))
	if err != nil {
		return DomainStatus{}, err
	}
	visible, hidden, err := s.queueCounts(ctx, dlq)
	if err != nil {
		return DomainStatus{}, err
	}
	ds.DeadLetters = visible + hidden
	if peek && visible > 0 {
		ds.Oldest, err = s.oldestIn(ctx, dlq)
	}
	return ds, err
}

// OldestDeadLetter is the oldest of the first deadLetterPeek dead letters
// of d; nil when its DLQ is empty. Reading them hides them from other
// readers (a redrive, `transit dlq list`) for as long as it takes.
func (s *Service) OldestDeadLetter(ctx context.Context, d messages.Domain) (*DeadLetterSummary, error) {
	dlq, err := s.QueueURL(ctx, s.Stack.DeadLetterQueue(d))
	if err != nil {
		return nil, err
	}
	return s.oldestIn(ctx, dlq)
}

func (s *Service) oldestIn(ctx context.Context, dlqURL string) (*DeadLetterSummary, error) {
	// Read as `transit dlq list` reads them: made visible again at once.
	letters, err := transport.ListDeadLetters(ctx, s.SQS, dlqURL, deadLetterPeek)
	if err != nil {
		return nil, err
	}
	var oldest *DeadLetterSummary
	for _, l := range letters {
		if oldest == nil || l.SentAt.Before(oldest.SentAt) {
			oldest = &DeadLetterSummary{MessageID: l.MessageID, Type: messages.Type(l.Attributes[messages.TypeAttribute]),
				Reason: l.Reason, SentAt: l.SentAt}
		}
	}
	return oldest, nil
}

// queueCounts reads a queue's approximate visible and in-flight counts.
func (s *Service) queueCounts(ctx context.Context, url string) (visible, inFlight int, err error) {
	attrs, err := s.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, 0, fmt.Errorf("counts of %s: %w", url, err)
	}
	visible, _ = strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight, nil
}

// shardOwners counts the timer shards each owner holds, as the
// schedulers see them: a claim lapses TRANSIT_TIMER_LEASE after its last
// renewal.
func (s *Service) shardOwners(ctx context.Context) (map[string]int, error) {
	shards, err := s.Store.Shards(ctx, s.Config.TimerShards)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	owners := map[string]int{}
	for _, sh := range shards {
		owner := sh.Owner
		if sh.Lapsed(s.Config.TimerLease, now) {
			owner = ""
		}
		owners[owner]++
	}
	return owners, nil
}

// leaseOwners counts the unexpired stream shard leases each fan-in owner
// holds, over every streamed table of the stack.
func (s *Service) leaseOwners(ctx context.Context) (map[string]int, error) {
	leases := streams.NewDynamoDBLeaseStore(s.DynamoDB, store.TableName(s.Config.Prefix, store.StreamLeases))
	now := time.Now()
	owners := map[string]int{}
	for _, t := range store.Tables {
		if t.Stream == "" {
			continue
		}
		desc, err := s.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(store.TableName(s.Config.Prefix, t))})
		if err != nil {
			return nil, fmt.Errorf("stream of %s: %w", t.Name, err)
		}
		arn := aws.ToString(desc.Table.LatestStreamArn)
		if arn == "" {
			continue
		}
		snap, err := leases.List(ctx, fanInGroup, arn)
		if err != nil {
			return nil, fmt.Errorf("leases of %s: %w", t.Name, err)
		}
		for _, l := range snap.Leases {
			if l.Owner != "" && l.ExpiresAt.After(now) {
				owners[l.Owner]++
			}
		}
	}
	return owners, nil
}

// serveStatus asks the serve at addr for its counts.
func serveStatus(ctx context.Context, addr string) (*ServeStatus, error) {
	body, err := AskServe(ctx, addr, "/status")
	if err != nil {
		return nil, err
	}
	var ss ServeStatus
	if err := json.Unmarshal(body, &ss); err != nil {
		return nil, fmt.Errorf("/status: %w", err)
	}
	return &ss, nil
}

// AskServe GETs path from the ops server of the serve at addr (host:port,
// :port meaning this host) and returns the body of a 200 answer; any
// other answer is an error with its status and body.
func AskServe(ctx context.Context, addr, path string) ([]byte, error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// WriteText prints the status on one screen.
func (st Status) WriteText(w io.Writer) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tQUEUED\tIN_FLIGHT\tHANDLED/1m\tREJECTED/1m\tFAILED/1m\tDLQ\tOLDEST_DEAD_LETTER")
	for _, d := range st.Domains {
		oldest := "-"
		if o := d.Oldest; o != nil {
			reason := o.Reason
			if reason == "" {
				reason = "moved by SQS after too many receives"
			}
			oldest = o.SentAt.Format(time.RFC3339) + " " + string(o.Type) + ": " + reason
		}
		handled, rejected, failed := "-", "-", "-"
		if st.Serve != nil {
			c := st.Serve.Domains[d.Domain]
			handled, rejected, failed = fmtCount(c.Handled), fmtCount(c.Rejected), fmtCount(c.Failed)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\n", d.Domain, d.Queued, d.InFlight, handled, rejected, failed, d.DeadLetters, oneLine(oldest, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\ntimer shards: %s\n", owners(st.TimerShards, "unowned"))
	fmt.Fprintf(&b, "stream leases: %s\n", owners(st.StreamLeases, ""))
	switch {
	case st.Serve != nil:
		fmt.Fprintf(&b, "counts of the last %s from the serve at %s (host %s, pid %d); each replica counts its own\n",
			st.Serve.Window, st.ServeAddr, st.Serve.Host, st.Serve.PID)
	default:
		fmt.Fprintf(&b, "no counts: the serve at %s did not answer: %s\n", st.ServeAddr, st.ServeError)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// owners lists owner: count, most first; unowned names the "" owner.
func owners(counts map[string]int, unowned string) string {
	if len(counts) == 0 {
		return "none"
	}
	names := make([]string, 0, len(counts))
	for o := range counts {
		names = append(names, o)
	}
	slices.SortFunc(names, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, o := range names {
		name := o
		if o == "" {
			name = unowned
		}
		parts[i] = fmt.Sprintf("%s %d", name, counts[o])
	}
	return strings.Join(parts, ", ")
}

func fmtCount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// oneLine keeps a reason on its row: its first line, at most n characters.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
