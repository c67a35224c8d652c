package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"transit/messages"
)

// Streams of the log lines an agent reports (messages.LogLine).
const (
	stdout = "stdout"
	stderr = "stderr"
)

// questionPrefix starts a stdout line that asks the task's user a question.
const questionPrefix = "?? "

// flushEvery is the longest a line waits before it is sent (unless a
// command of the task is still on its way, which it then follows).
const flushEvery = 500 * time.Millisecond

// limits are what transit checks a task.progress command against: lines
// per command and characters per line. They are read from the message
// catalogue's schema of task.progress, so they cannot drift from
// messages' own limits, which are not exported.
type limits struct {
	Lines, LineLength int
}

var progressLimits = sync.OnceValues(func() (limits, error) {
	files, err := messages.Schemas()
	if err != nil {
		return limits{}, fmt.Errorf("read the message catalogue: %w", err)
	}
	for _, f := range files {
		if f.Kind != messages.CommandSchema || f.Type != messages.TaskProgress {
			continue
		}
		var s struct {
			Properties struct {
				Lines struct {
					MaxItems int `json:"maxItems"`
					Items    struct {
						Properties struct {
							Line struct {
								MaxLength int `json:"maxLength"`
							} `json:"line"`
						} `json:"properties"`
					} `json:"items"`
				} `json:"lines"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(f.JSON, &s); err != nil {
			return limits{}, fmt.Errorf("read the schema of %s: %w", f.Type, err)
		}
		l := limits{Lines: s.Properties.Lines.MaxItems, LineLength: s.Properties.Lines.Items.Properties.Line.MaxLength}
		if l.Lines <= 0 || l.LineLength <= 0 {
			return limits{}, fmt.Errorf("the schema of %s has no limit on lines (%+v)", f.Type, l)
		}
		return l, nil
	}
	return limits{}, fmt.Errorf("the message catalogue has no schema of %s", messages.TaskProgress)
})

// question is a question the task's command asked on stdout, and the
// sequence number of the line that asked it.
type question struct {
	seq  int64
	text string
}

// output collects a task's stdout and stderr lines as the command writes
// them: each gets the next sequence number and a time no earlier than the
// line before it (transit keys a line by time, then number, so both
// orders agree), and waits in order until the reporter takes it. Nothing
// is dropped: lines pile up while a command is on its way to transit.
type output struct {
	limits limits
	now    func() time.Time
	// notify has a value when something was added since the reporter
	// last looked.
	notify chan struct{}

	mu    sync.Mutex
	seq   int64
	last  time.Time
	lines []messages.LogLine
	// added is when the oldest line waiting was added (by the clock the
	// flush interval is measured with, not now).
	added time.Time
	// taken is the sequence number of the last line taken for sending.
	taken     int64
	questions []question
	// lastLine is each stream's last non-empty line: the result or the
	// error of the task.
	lastLine map[string]string
}

func newOutput(l limits, now func() time.Time) *output {
	return &output{limits: l, now: now, notify: make(chan struct{}, 1), lastLine: map[string]string{}}
}

// writer is an io.Writer for one stream of the command, cutting what it
// is given into lines.
func (o *output) writer(stream string) *lineWriter { return &lineWriter{out: o, stream: stream} }

// add records one line of a stream.
func (o *output) add(stream, text string) {
	text = printable(strings.TrimSuffix(text, "\r"))
	chunks := cut(text, o.limits.LineLength)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, chunk := range chunks {
		o.seq++
		at := o.now().UTC()
		if at.Before(o.last) {
			at = o.last
		}
		o.last = at
		if len(o.lines) == 0 {
			o.added = time.Now()
		}
		level := "info"
		if stream == stderr {
			level = "warn"
		}
		o.lines = append(o.lines, messages.LogLine{Seq: o.seq, At: at, Stream: stream, Line: chunk, Level: level})
		if strings.TrimSpace(chunk) != "" {
			o.lastLine[stream] = chunk
		}
		// Only a line's start can ask: the rest of a long line is text.
		if q, ok := strings.CutPrefix(chunk, questionPrefix); ok && i == 0 && stream == stdout && strings.TrimSpace(q) != "" {
			o.questions = append(o.questions, question{seq: o.seq, text: strings.TrimSpace(q)})
		}
	}
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// waiting is how many lines wait to be sent, and since when the oldest.
func (o *output) waiting() (int, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.lines), o.added
}

// take removes and returns the next lines to send: at most the limit,
// and none past a question's line, so the question can follow its line
// at once.
func (o *output) take() []messages.LogLine {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := min(len(o.lines), o.limits.Lines)
	if len(o.questions) > 0 {
		for i, l := range o.lines[:n] {
			if l.Seq == o.questions[0].seq {
				n = i + 1
				break
			}
		}
	}
	batch := append([]messages.LogLine(nil), o.lines[:n]...)
	// What is left keeps its time: it has waited as long, and goes next.
	o.lines = o.lines[n:]
	if n > 0 {
		o.taken = batch[n-1].Seq
	}
	return batch
}

// question is the next question to ask and whether its line has been
// taken for sending already (ready), or still waits.
func (o *output) question() (q question, ready, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.questions) == 0 {
		return question{}, false, false
	}
	return o.questions[0], o.questions[0].seq <= o.taken, true
}

// asked drops the next question: it is being asked.
func (o *output) asked() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.questions = o.questions[1:]
}

// unasked drops and returns the questions never asked.
func (o *output) unasked() []question {
	o.mu.Lock()
	defer o.mu.Unlock()
	qs := o.questions
	o.questions = nil
	return qs
}

// lastNonEmpty is the last line of a stream that was not blank.
func (o *output) lastNonEmpty(stream string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lastLine[stream]
}

// lineWriter cuts a stream into lines; Close adds the last one if it had
// no line break.
type lineWriter struct {
	out     *output
	stream  string
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.out.add(w.stream, string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	// A line that never ends (a progress bar redrawn with \r) is sent in
	// pieces rather than held: four bytes a character at most.
	for limit := 4 * w.out.limits.LineLength; len(w.partial) >= limit; {
		end := limit
		for end > limit-utf8.UTFMax && !utf8.RuneStart(w.partial[end]) {
			end--
		}
		w.out.add(w.stream, string(w.partial[:end]))
		w.partial = w.partial[end:]
	}
	w.partial = append([]byte(nil), w.partial...)
	return len(p), nil
}

// Close adds what is left, a last line without a line break.
func (w *lineWriter) Close() error {
	if len(w.partial) > 0 {
		w.out.add(w.stream, string(w.partial))
		w.partial = nil
	}
	return nil
}

// ansiEscape matches terminal control sequences (colours, cursor moves),
// which say nothing in a log.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)`)

// printable makes a line acceptable to transit, which refuses (and
// dead-letters) prose with control characters other than tab and line
// breaks: escape sequences go, any other control character becomes U+FFFD.
func printable(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\r') || r == 0x7f {
			return utf8.RuneError
		}
		return r
	}, s)
}

// cut splits a line into pieces of at most n characters; an empty line is
// one empty piece.
func cut(s string, n int) []string {
	var pieces []string
	for utf8.RuneCountInString(s) > n {
		i, count := 0, 0
		for count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		pieces = append(pieces, s[:i])
		s = s[i:]
	}
	return append(pieces, s)
}
