package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"transit/messages"
	"transit/transport"
)

// deadLetterPage bounds the dead letters shown, and redriven at once, per
// domain.
const deadLetterPage = 100

// secretFields are the payload members whose values the console never
// shows: a secret's value, a user's password.
var secretFields = map[string]bool{"value": true, "password": true, "password_hash": true, "token": true}

type deadLetterGroup struct {
	Domain  messages.Domain
	Queue   string
	Letters []deadLetterRow
}

type deadLetterRow struct {
	transport.DeadLetter
	Type string
	Body string // redacted
}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request) {
	var groups []deadLetterGroup
	for _, d := range messages.Domains() {
		url, err := c.queueURL(r.Context(), c.svc.Stack.DeadLetterQueue(d))
		if err != nil {
			c.fail(w, r, "the dead-letter queues", err)
			return
		}
		letters, err := transport.ListDeadLetters(r.Context(), c.svc.SQS, url, deadLetterPage)
		if err != nil {
			c.fail(w, r, "the dead letters of "+string(d), err)
			return
		}
		g := deadLetterGroup{Domain: d, Queue: c.svc.Stack.DeadLetterQueue(d)}
		for _, l := range letters {
			g.Letters = append(g.Letters, deadLetterRow{DeadLetter: l, Type: l.Attributes[messages.TypeAttribute], Body: redacted(l.Body)})
		}
		groups = append(groups, g)
	}
	c.render(w, r, "deadletters", map[string]any{"Groups": groups, "Moved": r.URL.Query().Get("moved")})
}

// redrive moves one dead letter (message_id) or all of a domain's back to
// its command queue, once confirmed: the first POST shows what it will
// do, the second, with confirm, does it.
func (c *Console) redrive(w http.ResponseWriter, r *http.Request) {
	d := messages.Domain(r.PostFormValue("domain"))
	if !slices.Contains(messages.Domains(), d) {
		http.Error(w, fmt.Sprintf("no domain %q", d), http.StatusBadRequest)
		return
	}
	id := r.PostFormValue("message_id")
	if r.PostFormValue("confirm") != "yes" {
		c.render(w, r, "redrive", map[string]any{"Domain": d, "MessageID": id, "Queue": c.svc.Stack.CommandQueue(d)})
		return
	}
	dlq, err := c.queueURL(r.Context(), c.svc.Stack.DeadLetterQueue(d))
	if err == nil {
		var queue string
		if queue, err = c.queueURL(r.Context(), c.svc.Stack.CommandQueue(d)); err == nil {
			var pick func(transport.DeadLetter) bool
			if id != "" {
				pick = func(l transport.DeadLetter) bool { return l.MessageID == id }
			}
			var moved int
			moved, err = transport.Redrive(r.Context(), c.svc.SQS, dlq, queue, deadLetterPage, pick)
			c.opts.Logger.Info("console redrove dead letters", "domain", d, "message_id", id, "moved", moved)
			if err == nil {
				http.Redirect(w, r, fmt.Sprintf("/dead-letters?moved=%d", moved), http.StatusSeeOther)
				return
			}
		}
	}
	c.fail(w, r, "the redrive of "+string(d), err)
}

func (c *Console) queueURL(ctx context.Context, name string) (string, error) {
	out, err := c.svc.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// redacted is a message body, indented, with every secret member's value
// hidden; a body that is not JSON is shown as it is.
func redacted(body string) string {
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return body
	}
	out, err := json.MarshalIndent(hide(v), "", "  ")
	if err != nil {
		return body
	}
	return string(out)
}

func hide(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if secretFields[strings.ToLower(k)] {
				x[k] = "(hidden)"
				continue
			}
			x[k] = hide(e)
		}
	case []any:
		for i, e := range x {
			x[i] = hide(e)
		}
	}
	return v
}
