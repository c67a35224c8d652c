package console

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A dead letter's body never shows a secret member's value, whether the
// body is JSON, JSON nested in a string, or not JSON at all (cut short,
// or a command escaped inside another), and shows an http(s) callback by
// its host only.
func TestRedacted_hides_secrets(t *testing.T) {
	for name, body := range map[string]string{
		"json":             `{"type":"secret.stored","payload":{"value":"s3cr3t-1"}}`,
		"nested string":    `{"message":"{\"payload\":{\"password\":\"s3cr3t-1\"}}"}`,
		"cut short":        `{"type": "secret.stored", "payload": {"value": "s3cr3t-1`,
		"escaped, cut":     `{"message": "{\"payload\":{\"password\":\"s3cr3t-1\",\"x\":1`,
		"unquoted":         `value=s3cr3t-1 other=1`,
		"callback in json": `{"callback":"https://hooks.example/x?token=s3cr3t-1"}`,
		"callback, cut":    `{"callback": "https://hooks.example/x?token=s3cr3t-1`,
	} {
		got := redacted(body)
		assert.NotContains(t, got, "s3cr3t-1", name)
		if strings.Contains(body, "hooks.example") {
			assert.Contains(t, got, "https://hooks.example/…", name)
		}
	}
	assert.Contains(t, redacted(`{"track_id":"t-1"}`), `"track_id": "t-1"`, "the rest is shown")
}
