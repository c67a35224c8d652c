package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/console"
	"transit/messages"
	"transit/service"
)

// consoleClient is a browser-like client of a console: it keeps cookies
// and follows redirects.
type consoleClient struct {
	t    *testing.T
	base string
	http *http.Client
}

func newConsoleClient(t *testing.T, base string) *consoleClient {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &consoleClient{t: t, base: base, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

func (c *consoleClient) get(path string) (int, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.base + path)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, string(body)
}

func (c *consoleClient) post(path string, form url.Values) (int, string) {
	c.t.Helper()
	resp, err := c.http.PostForm(c.base+path, form)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, string(body)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// csrf is the CSRF token the forms of page carry.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(page)
	require.NotNil(t, m, "the page's forms carry a CSRF token")
	return m[1]
}

// servedConsole serves the stack with its console on a free loopback
// address and returns the console's base URL.
func servedConsole(t *testing.T, token string, modify ...func(*config.Config)) (*stack, string) {
	addr := freeAddr(t)
	s := newStack(t, append(modify, func(c *config.Config) { c.HTTPAddr, c.ConsoleToken = addr, token })...)
	c, err := console.New(s.svc, console.Options{Token: token, Live: 500 * time.Millisecond})
	require.NoError(t, err)
	s.serve(service.ServeOptions{Console: c.Serving, Now: time.Now})
	waitStatus(t, "http://"+addr+"/healthz", http.StatusOK, 30*time.Second)
	return s, "http://" + addr
}

// deadLetter puts a command into the sandbox DLQ as transit's poison path
// leaves one, with reason.
func (s *stack) deadLetter(id string, t messages.Type, payload any, reason string) {
	body, err := messages.NewCommand(id, t, payload, time.Now())
	require.NoError(s.t, err)
	_, err = s.svc.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(s.dlqURL), MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			messages.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(t))},
			"reason_poisoned":      {DataType: aws.String("String"), StringValue: aws.String(reason)},
		},
	})
	require.NoError(s.t, err)
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var domainRow = regexp.MustCompile(`(?s)<tr data-domain="sandbox">(.*?)</tr>`)

// sandboxFigure reads one figure of the sandbox row of the overview.
func sandboxFigure(t *testing.T, page, field string) int {
	row := domainRow.FindStringSubmatch(page)
	require.NotNil(t, row, "the overview has a sandbox row")
	m := regexp.MustCompile(`data-field="` + field + `">(?:<a [^>]*><strong>)?(\d+)`).FindStringSubmatch(row[1])
	require.NotNil(t, m, "the sandbox row has %s", field)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// The overview reflects a known mix of commands; a poison message shows
// under dead letters with its reason; a dead-lettered command is
// redriven from the page, after a confirmation, and is then handled; a
// POST without the CSRF token is refused and moves nothing.
func TestConsole_overview_dead_letters_and_redrive(t *testing.T) {
	s, base := servedConsole(t, "")
	s.sync("ext-1", "ext-2")
	first := uuid.NewString()
	s.send(first, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-1"})
	s.eventFor(first, messages.SandboxAllocated)
	unknown := uuid.NewString()
	s.send(unknown, messages.SandboxMarkDeletion, messages.SandboxMarkDeletionPayload{SandboxID: uuid.NewString(), TrackID: "track-1"})
	s.eventFor(unknown, messages.SandboxDeletionRejected)
	s.sendRaw(`{"not": "a command"`, nil)
	parked := uuid.NewString()
	s.deadLetter(parked, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-2"}, "table missing")

	c := newConsoleClient(t, base)
	var page string
	require.Eventually(t, func() bool {
		code, body := c.get("/")
		page = body
		return code == http.StatusOK && sandboxFigure(t, body, "dead_letters") == 2 && sandboxFigure(t, body, "handled") >= 3
	}, 45*time.Second, 500*time.Millisecond, "the overview shows two dead letters and three handled commands")
	assert.Equal(t, 1, sandboxFigure(t, page, "rejected"), "the mark-deletion of an unknown sandbox")
	assert.Equal(t, 0, sandboxFigure(t, page, "queued"))

	code, letters := c.get("/dead-letters")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, letters, "table missing")
	assert.Contains(t, letters, "a command&#34;", "the poison message's body, escaped")
	assert.Regexp(t, `class="reason">[^<]*(invalid|malformed|decode|JSON|json)`, letters, "the poison message's reason")
	parkedRow := regexp.MustCompile(`data-message-id="([^"]+)"[^>]*>\s*<td><code>[^<]+</code></td>\s*<td><code>sandbox.allocate</code>`).FindStringSubmatch(letters)
	require.NotNil(t, parkedRow, "the parked allocation is listed")
	messageID := parkedRow[1]

	form := url.Values{"domain": {"sandbox"}, "message_id": {messageID}}
	code, _ = c.post("/dead-letters/redrive", form)
	assert.Equal(t, http.StatusForbidden, code, "no CSRF token")
	form.Set("csrf", csrfOf(t, letters))
	code, confirm := c.post("/dead-letters/redrive", form)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, confirm, messageID, "the confirmation names the message")
	s.deadLetters(2)

	form.Set("confirm", "yes")
	code, done := c.post("/dead-letters/redrive", form)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, done, "Redrove 1 message(s)")
	s.eventFor(parked, messages.SandboxAllocated)
	left := s.deadLetters(1)
	assert.NotEqual(t, messageID, left[0].MessageID, "only the poison message is left")
}

// Without a token the console answers loopback clients only; with one,
// every request needs it (a wrong one is refused) and the login sets an
// HttpOnly, SameSite=Strict session cookie; hostile values render inert.
func TestConsole_security(t *testing.T) {
	s, base := servedConsole(t, "")
	open, err := console.New(s.svc, console.Options{})
	require.NoError(t, err)
	far := httptest.NewRequest(http.MethodGet, "/", nil)
	far.RemoteAddr = "192.0.2.10:40000"
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, far)
	assert.Equal(t, http.StatusForbidden, rec.Code, "another address, no token")

	for host, want := range map[string]int{"rebound.example:9090": http.StatusForbidden, "localhost:9090": http.StatusOK, "127.0.0.1:9090": http.StatusOK} {
		near := httptest.NewRequest(http.MethodGet, "/login", nil)
		near.RemoteAddr, near.Host = "127.0.0.1:40000", host
		rec := httptest.NewRecorder()
		open.ServeHTTP(rec, near)
		// /login redirects to / without a token: admitted.
		if want == http.StatusOK {
			assert.Equal(t, http.StatusSeeOther, rec.Code, "a loopback client at %s", host)
		} else {
			assert.Equal(t, want, rec.Code, "a loopback client at %s: a name rebound to 127.0.0.1", host)
		}
	}
	for name, header := range map[string][2]string{"Sec-Fetch-Site": {"Sec-Fetch-Site", "cross-site"}, "Origin": {"Origin", "http://evil.example"}} {
		post := httptest.NewRequest(http.MethodPost, "/dead-letters/redrive", strings.NewReader("domain=sandbox&csrf=x"))
		post.RemoteAddr, post.Host = "127.0.0.1:40000", "127.0.0.1:9090"
		post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		post.Header.Set(header[0], header[1])
		post.AddCookie(&http.Cookie{Name: "transit_csrf", Value: "x"})
		rec := httptest.NewRecorder()
		open.ServeHTTP(rec, post)
		assert.Equal(t, http.StatusForbidden, rec.Code, "a POST from another site (%s), cookie and field matching", name)
	}

	guarded, err := console.New(s.svc, console.Options{Token: "a-console-token-0123"})
	require.NoError(t, err)
	for _, bearer := range []string{"", "Bearer wrong-token-0123456789"} {
		req := httptest.NewRequest(http.MethodGet, "/sandboxes", nil)
		req.RemoteAddr = "192.0.2.10:40000"
		req.Header.Set("Accept", "text/event-stream")
		if bearer != "" {
			req.Header.Set("Authorization", bearer)
		}
		rec := httptest.NewRecorder()
		guarded.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusUnauthorized, rec.Code, "token %q", bearer)
	}
	login := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token=wrong-token-0123456789&csrf=x"))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	login.AddCookie(&http.Cookie{Name: "transit_csrf", Value: "x"})
	rec = httptest.NewRecorder()
	guarded.ServeHTTP(rec, login)
	assert.Equal(t, http.StatusUnauthorized, rec.Code, "a wrong token at the login form")
	for _, ck := range rec.Result().Cookies() {
		assert.NotEqual(t, "transit_console", ck.Name, "and no session")
	}

	login = httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token=a-console-token-0123&csrf=x&next="+url.QueryEscape(`/\evil.example/`)))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	login.AddCookie(&http.Cookie{Name: "transit_csrf", Value: "x"})
	rec = httptest.NewRecorder()
	guarded.ServeHTTP(rec, login)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	assert.Equal(t, "/", rec.Header().Get("Location"), "a next that a browser would read as another host")
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	session := cookies[0]
	assert.True(t, session.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, session.SameSite)
	assert.NotContains(t, session.Value, "a-console-token-0123", "the cookie proves the token without carrying it")
	page := httptest.NewRequest(http.MethodGet, "/timers", nil)
	page.RemoteAddr = "192.0.2.10:40000"
	page.AddCookie(session)
	rec = httptest.NewRecorder()
	guarded.ServeHTTP(rec, page)
	assert.Equal(t, http.StatusOK, rec.Code, "signed in, from another address")

	// Secrets in dead letters: a malformed secret.stored, a user.register
	// and a timer.create whose callback carries a token in its query.
	s.sendRaw(`{"type": "secret.stored", "payload": {"org_id": "acme", "secret_id": "db", "value": "hunter2-secret-value`, nil)
	register, err := messages.NewCommand(uuid.NewString(), messages.UserRegister, messages.UserRegisterPayload{OrgID: "acme", UserID: "u-1",
		Email: "u@acme.test", Password: "correct-horse-password", DisplayName: "U", Role: messages.RoleMember, Actor: "system"}, time.Now())
	require.NoError(t, err)
	s.deadLetter(uuid.NewString(), messages.SandboxAllocate, json.RawMessage(`{"command": `+jsonString(string(register))+`, "callback": "https://hooks.example/x?token=callback-secret-token"}`), "parked by hand")
	s.deadLetters(2)
	c := newConsoleClient(t, base)
	code, letters := c.get("/dead-letters")
	require.Equal(t, http.StatusOK, code)
	for _, secret := range []string{"hunter2-secret-value", "correct-horse-password", "callback-secret-token"} {
		assert.NotContains(t, letters, secret)
	}
	assert.Contains(t, letters, "(hidden)")
	assert.Contains(t, letters, "https://hooks.example/…", "a callback by its host")

	// Hostile values, through the served console.
	hostile := `"><script>window.pwned=1</script>`
	s.syncInventory(uuid.NewString(), []messages.InventoryItem{{ExternalID: "ext" + hostile, Name: "name" + hostile, LabDurationHours: 4}})
	for _, path := range []string{"/sandboxes", "/history?entity=" + url.QueryEscape("SANDBOX#"+hostile), "/trace?correlation=" + url.QueryEscape(hostile)} {
		code, body := c.get(path)
		require.Equal(t, http.StatusOK, code, path)
		assert.NotContains(t, body, "<script>window.pwned", path)
		assert.Contains(t, body, "&lt;script&gt;window.pwned=1&lt;/script&gt;", "%s shows the value as text", path)
	}
}
