// Package console is the operator console: server-rendered pages that
// show a stack as its domains see it (queues and dead letters, the
// sandbox pool, timer shards, an entity's history, a correlation's
// chain) and steer it (redrive a dead letter). `transit serve` serves it
// on TRANSIT_HTTP_ADDR beside /metrics. Pages are html/template, so every
// value is escaped where it lands; live views are Server-Sent Events
// swapped in by htmx, embedded with the templates (no build step).
package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"transit/messages"
	"transit/service"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cookie names: the session (the token's proof, with a token only) and
// the CSRF token every form carries back.
const (
	sessionCookie = "transit_console"
	csrfCookie    = "transit_csrf"
	csrfField     = "csrf"
)

// Options configure a console.
type Options struct {
	// Token is TRANSIT_CONSOLE_TOKEN: when set every request must prove
	// it (a session cookie set by the login form, or an Authorization:
	// Bearer header), from any address; when empty only loopback
	// clients are served.
	Token string
	// Counts is the serving replica's last minute of deliveries; nil
	// when the console runs without serve.
	Counts func() service.ServeStatus
	// Live is how often the stack-wide live views (the overview, the
	// task board) are read again; default 5s. A task's page follows its
	// task every second, or every Live if that is shorter: it reads one
	// task.
	Live   time.Duration
	Logger *slog.Logger
}

// Console is the console's HTTP handler.
type Console struct {
	svc   *service.Service
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	// guarded is mux behind Go's cross-origin protection: a POST from
	// another origin is refused whatever cookies it carries (a page on
	// another port of localhost shares them).
	guarded http.Handler

	// oldest is each DLQ's oldest letter as last read (oldestOf).
	oldest map[messages.Domain]oldestSeen

	// snaps are the live views' last reads (shared).
	snapMu sync.Mutex
	snaps  map[string]*snapshot
}

// snapshot is a view's last read and when it was made; mu is held while
// it is read again.
type snapshot struct {
	mu sync.Mutex
	at time.Time
	v  any
}

// readTimeout bounds one shared read of AWS.
const readTimeout = 10 * time.Second

// shared runs read for the view key, or returns its last result if that
// is younger than the live interval: every viewer of a view, and the
// page load before its first live event, share one read of AWS per
// interval. A viewer waits for a read of its view under way rather than
// make its own; views do not wait for one another. The read has a
// context of its own: it serves every viewer, not only the one whose
// request started it.
func shared[T any](ctx context.Context, c *Console, key string, read func(ctx context.Context) (T, error)) (T, error) {
	c.snapMu.Lock()
	now := time.Now()
	for k, s := range c.snaps {
		if k != key && s.mu.TryLock() {
			if now.Sub(s.at) > time.Minute {
				delete(c.snaps, k) // a view nobody watches any more
			}
			s.mu.Unlock()
		}
	}
	s, ok := c.snaps[key]
	if !ok {
		s = &snapshot{}
		c.snaps[key] = s
	}
	c.snapMu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if v, fresh := s.v.(T); fresh && time.Since(s.at) < c.opts.Live {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	v, err := read(ctx)
	if err == nil {
		s.at, s.v = time.Now(), v
	}
	return v, err
}

// New returns the console of svc's stack.
func New(svc *service.Service, opts Options) (*Console, error) {
	if opts.Live <= 0 {
		opts.Live = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{svc: svc, opts: opts, pages: pages, mux: http.NewServeMux(), oldest: map[messages.Domain]oldestSeen{},
		snaps: map[string]*snapshot{}}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /login", c.loginForm)
	c.mux.HandleFunc("POST /login", c.login)
	c.mux.HandleFunc("GET /{$}", c.overview)
	c.mux.HandleFunc("GET /live/overview", c.overviewLive)
	c.mux.HandleFunc("GET /dead-letters", c.deadLetters)
	c.mux.HandleFunc("POST /dead-letters/redrive", c.redrive)
	c.mux.HandleFunc("GET /sandboxes", c.sandboxes)
	c.mux.HandleFunc("GET /timers", c.timers)
	c.mux.HandleFunc("GET /tasks", c.tasks)
	c.mux.HandleFunc("GET /live/tasks", c.tasksLive)
	c.mux.HandleFunc("GET /tasks/{org}/{task}", c.task)
	c.mux.HandleFunc("GET /live/tasks/{org}/{task}", c.taskLive)
	c.mux.HandleFunc("GET /schedules", c.schedules)
	c.mux.HandleFunc("GET /schedules/{id}", c.schedule)
	c.mux.HandleFunc("GET /history", c.history)
	c.mux.HandleFunc("GET /trace", c.trace)
	c.guarded = http.NewCrossOriginProtection().Handler(c.mux)
	return c, nil
}

// Serving is the console as ServeOptions.Console takes it: served by a
// replica, whose last minute of deliveries counts says.
func (c *Console) Serving(counts func() service.ServeStatus) http.Handler {
	c.opts.Counts = counts
	return c
}

// parsePages parses each page with the layout, so every page defines its
// own "content" and "title".
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	funcs := template.FuncMap{"since": since, "callback": callbackShown}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := n[len("templates/") : len(n)-len(".html")]
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
}

// ServeHTTP admits the request (loopback, or the token) and routes it.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	switch {
	case c.opts.Token == "" && (!loopback(r.RemoteAddr) || !loopbackHost(r.Host)):
		// The Host too: a page whose own name resolves to 127.0.0.1 (DNS
		// rebinding) would otherwise read the console as its own origin.
		http.Error(w, "the console answers loopback clients only, at localhost or a loopback address; set TRANSIT_CONSOLE_TOKEN to open it to others", http.StatusForbidden)
		return
	case r.Header.Get("Sec-Fetch-Site") == "cross-site" && r.Header.Get("Sec-Fetch-Mode") != "navigate":
		// Another site's page may link here, not read or stream from here.
		http.Error(w, "refused: a cross-site request", http.StatusForbidden)
		return
	case c.opts.Token != "" && !c.authenticated(r) && !public(r):
		if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		http.Error(w, "the console needs its token", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost && !c.sameOrigin(r) {
		http.Error(w, "refused: the form did not carry the console's CSRF token", http.StatusForbidden)
		return
	}
	c.guarded.ServeHTTP(w, r)
}

// public paths need no session: the login form and what it loads.
func public(r *http.Request) bool {
	p := r.URL.Path
	return p == "/login" || len(p) > len("/static/") && p[:len("/static/")] == "/static/"
}

// loopbackHost: the request names the console as localhost or by a
// loopback address.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticated: the session cookie proves the token, or the request
// carries it as a bearer token.
func (c *Console) authenticated(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); len(h) > len("Bearer ") && h[:len("Bearer ")] == "Bearer " {
		return subtle.ConstantTimeCompare([]byte(h[len("Bearer "):]), []byte(c.opts.Token)) == 1
	}
	ck, err := r.Cookie(sessionCookie)
	return err == nil && hmac.Equal([]byte(ck.Value), []byte(c.session()))
}

// session is the session cookie's value: a MAC of the token, so the
// cookie proves the token without carrying it.
func (c *Console) session() string {
	m := hmac.New(sha256.New, []byte(c.opts.Token))
	m.Write([]byte("transit console session"))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin: a POST carries the CSRF cookie's value in its form. The
// cookie is SameSite=Strict, so a page of another site cannot make the
// browser send it, and cannot read it to copy it into its form.
func (c *Console) sameOrigin(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || ck.Value == "" {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(ck.Value))
}

// csrf returns the request's CSRF token, setting the cookie when it has
// none yet.
func csrf(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 64 {
		return ck.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return v
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	if c.opts.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.opts.Token == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(c.opts.Token)) != 1 {
		c.render(w, r, http.StatusUnauthorized, "login", map[string]any{"Next": safeNext(r.PostFormValue("next")), "Failed": true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.session(), Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// safeNext keeps a redirect after login on the console: a path of its
// own and its query, nothing a browser could read as another host.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") ||
		strings.HasPrefix(u.Path, "//") || strings.ContainsAny(next, "\\\t\r\n") {
		return "/"
	}
	return (&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String()
}

// render writes page with data and status, adding what the layout
// needs.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, data map[string]any) {
	t := c.pages[page]
	if data == nil {
		data = map[string]any{}
	}
	data["CSRF"] = csrf(w, r)
	data["Prefix"] = c.svc.Config.Prefix
	data["Path"] = r.URL.Path
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		c.opts.Logger.Error("console page failed", "page", page, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail shows what went wrong reading the stack.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	c.opts.Logger.Warn("console could not read the stack", "page", r.URL.Path, "error", err)
	c.render(w, r, http.StatusBadGateway, "error", map[string]any{"What": what, "Error": err.Error()})
}

// fragment renders the template name of page with data: a live view's
// update.
func (c *Console) fragment(page, name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	err := c.pages[page].ExecuteTemplate(&buf, name, data)
	return buf.Bytes(), err
}

// errEnded ends a live view's reads: what it follows will not change
// again (a task that ended).
var errEnded = errors.New("the view's subject ended")

// stream answers a live view: it runs read at once and then every
// interval until the client goes, read sending Server-Sent Events of
// rendered fragments, each with an id the browser sends back as
// Last-Event-ID when it reconnects. Nothing is read from AWS while
// nobody watches, nor once read returns errEnded.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, every time.Duration, read func(ctx context.Context, send func(event, id string, data []byte)) error) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	send := func(event, id string, data []byte) {
		fmt.Fprintf(w, "event: %s\n", event)
		if id != "" {
			fmt.Fprintf(w, "id: %s\n", id)
		}
		// A value may hold a carriage return, which ends a line too.
		data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		for _, line := range bytes.Split(data, []byte("\n")) {
			fmt.Fprintf(w, "data: %s\n", line)
		}
		fmt.Fprint(w, "\n")
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		err := read(r.Context(), send)
		flusher.Flush()
		switch {
		case errors.Is(err, errEnded):
			// Held open: a closed stream would have the browser
			// reconnect and read again.
			<-r.Context().Done()
			return
		case err != nil && r.Context().Err() == nil:
			c.opts.Logger.Warn("console live view could not read the stack", "page", r.URL.Path, "error", err)
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// callbackShown is a timer's callback as the console shows it: an
// http(s) URL by its host only, since its path or query may hold a
// secret; a queue or topic as it is.
func callbackShown(callback string) string {
	u, err := url.Parse(callback)
	if err != nil {
		return "(unreadable)"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return callback
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// since is how long ago t was, rounded for reading.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}
