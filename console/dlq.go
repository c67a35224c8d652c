package console

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

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
		url, err := c.svc.QueueURL(r.Context(), c.svc.Stack.DeadLetterQueue(d))
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
	data := map[string]any{"Groups": groups, "Missing": r.URL.Query().Has("missing")}
	if moved, err := strconv.Atoi(r.URL.Query().Get("moved")); err == nil {
		data["Moved"] = moved
	}
	c.render(w, r, http.StatusOK, "deadletters", data)
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
		c.render(w, r, http.StatusOK, "redrive", map[string]any{"Domain": d, "MessageID": id, "Queue": c.svc.Stack.CommandQueue(d)})
		return
	}
	dlq, err := c.svc.QueueURL(r.Context(), c.svc.Stack.DeadLetterQueue(d))
	if err == nil {
		var queue string
		if queue, err = c.svc.QueueURL(r.Context(), c.svc.Stack.CommandQueue(d)); err == nil {
			var pick func(transport.DeadLetter) bool
			if id != "" {
				pick = func(l transport.DeadLetter) bool { return l.MessageID == id }
			}
			var moved int
			moved, err = transport.Redrive(r.Context(), c.svc.SQS, dlq, queue, deadLetterPage, pick)
			c.opts.Logger.Info("console redrove dead letters", "domain", d, "message_id", id, "moved", moved)
			if err == nil {
				next := fmt.Sprintf("/dead-letters?moved=%d", moved)
				if id != "" && moved == 0 {
					// Gone meanwhile, or hidden by another reader for now.
					next = "/dead-letters?missing"
				}
				http.Redirect(w, r, next, http.StatusSeeOther)
				return
			}
		}
	}
	c.fail(w, r, "the redrive of "+string(d), err)
}

// secretText finds a secret member's value in a body that is not JSON
// (a malformed command is what gets dead-lettered): "value": "…" and
// the like, quoted or not, escaped too (a command inside another's
// string), to the end of the value or of the body. callbackText finds an
// http(s) URL's path and query.
var (
	secretText   = regexp.MustCompile(`(?i)(\\?"?(?:` + strings.Join(slices.Sorted(maps.Keys(secretFields)), "|") + `)\\?"?\s*[:=]\s*)(\\?"(?:[^"\\]|\\[^"])*(?:\\?")?|[^\s,}]+)`)
	callbackText = regexp.MustCompile(`(?i)(https?://[^/\s"\\?#]+)[^\s"\\]*`)
)

// redacted is a message body, indented, with every secret member's value
// hidden, in JSON nested as a string too, and an http(s) callback shown
// by its host; a body that is not JSON is shown with anything shaped as
// a secret member hidden.
func redacted(body string) string {
	v, ok := parseJSON(body)
	if !ok {
		return callbackText.ReplaceAllString(secretText.ReplaceAllString(body, "${1}(hidden)"), "${1}/…")
	}
	out, err := json.MarshalIndent(hide(v), "", "  ")
	if err != nil {
		return "(not shown)"
	}
	return string(out)
}

// parseJSON reads s as a JSON object or array.
func parseJSON(s string) (any, bool) {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	return v, true
}

func hide(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch key := strings.ToLower(k); {
			case secretFields[key]:
				x[k] = "(hidden)"
			case key == "callback":
				if s, ok := e.(string); ok {
					x[k] = callbackShown(s)
				}
			default:
				x[k] = hide(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = hide(e)
		}
	case string:
		// A payload sent as a string, or a notification's Message.
		if nested, ok := parseJSON(x); ok {
			out, err := json.Marshal(hide(nested))
			if err != nil {
				return "(not shown)"
			}
			return string(out)
		}
	}
	return v
}
