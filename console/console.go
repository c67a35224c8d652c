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
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
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
	// Live is how often live views are refreshed; default 2s.
	Live   time.Duration
	Logger *slog.Logger
}

// Console is the console's HTTP handler.
type Console struct {
	svc   *service.Service
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux

	mu     sync.Mutex
	oldest map[messages.Domain]oldestSeen
}

// New returns the console of svc's stack.
func New(svc *service.Service, opts Options) (*Console, error) {
	if opts.Live <= 0 {
		opts.Live = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{svc: svc, opts: opts, pages: pages, mux: http.NewServeMux(), oldest: map[messages.Domain]oldestSeen{}}
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
	funcs := template.FuncMap{"since": since, "query": url.QueryEscape}
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
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
	switch {
	case c.opts.Token == "" && !loopback(r.RemoteAddr):
		http.Error(w, "the console answers loopback clients only; set TRANSIT_CONSOLE_TOKEN to open it to others", http.StatusForbidden)
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
	c.mux.ServeHTTP(w, r)
}

// public paths need no session: the login form and what it loads.
func public(r *http.Request) bool {
	p := r.URL.Path
	return p == "/login" || len(p) > len("/static/") && p[:len("/static/")] == "/static/"
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
	c.render(w, r, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.opts.Token == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(c.opts.Token)) != 1 {
		w.WriteHeader(http.StatusUnauthorized)
		c.render(w, r, "login", map[string]any{"Next": safeNext(r.PostFormValue("next")), "Failed": true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.session(), Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// safeNext keeps a redirect after login on the console.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.IsAbs() || u.Host != "" || len(u.Path) == 0 || u.Path[0] != '/' || (len(next) > 1 && next[1] == '/') {
		return "/"
	}
	return next
}

// render writes page with data, adding what the layout needs.
func (c *Console) render(w http.ResponseWriter, r *http.Request, page string, data map[string]any) {
	t := c.pages[page]
	if data == nil {
		data = map[string]any{}
	}
	data["CSRF"] = csrf(w, r)
	data["Prefix"] = c.svc.Config.Prefix
	data["Path"] = r.URL.Path
	data["Live"] = c.opts.Live
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := t.Execute(w, data); err != nil {
		c.opts.Logger.Error("console page failed", "page", page, "error", err)
	}
}

// fail shows what went wrong reading the stack.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	c.opts.Logger.Warn("console could not read the stack", "page", r.URL.Path, "error", err)
	w.WriteHeader(http.StatusBadGateway)
	c.render(w, r, "error", map[string]any{"What": what, "Error": err.Error()})
}

// stream answers a live view: it runs read at once and then every Live
// until the client goes, read sending Server-Sent Events of rendered
// fragments. Nothing is read from AWS while nobody watches.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, read func(ctx context.Context, send func(event string, data []byte)) error) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	send := func(event string, data []byte) {
		fmt.Fprintf(w, "event: %s\n", event)
		for _, line := range bytes.Split(data, []byte("\n")) {
			fmt.Fprintf(w, "data: %s\n", line)
		}
		fmt.Fprint(w, "\n")
	}
	tick := time.NewTicker(c.opts.Live)
	defer tick.Stop()
	for {
		if err := read(r.Context(), send); err != nil && r.Context().Err() == nil {
			c.opts.Logger.Warn("console live view could not read the stack", "page", r.URL.Path, "error", err)
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// since is how long ago t was, rounded for reading.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}
