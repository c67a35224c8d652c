package messages_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/messages"
)

// catalogueDir is the checked-in catalogue, relative to this package.
const catalogueDir = "../schemas"

// catalogue generates the schemas and compiles each; formats are asserted,
// as they are part of the contract (the calendar of a date-time).
func catalogue(t *testing.T) ([]messages.SchemaFile, map[string]*jsonschema.Schema) {
	t.Helper()
	files, err := messages.Schemas()
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	for _, f := range files {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(f.JSON))
		require.NoError(t, err, f.Path)
		require.NoError(t, c.AddResource(f.ID, doc), f.Path)
	}
	compiled := map[string]*jsonschema.Schema{}
	for _, f := range files {
		sch, err := c.Compile(f.ID)
		require.NoError(t, err, "%s does not compile", f.Path)
		compiled[f.ID] = sch
	}
	return files, compiled
}

func TestSchemas_match_the_checked_in_catalogue(t *testing.T) {
	files, err := messages.Schemas()
	require.NoError(t, err)

	onDisk := map[string][]byte{}
	err = filepath.WalkDir(catalogueDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(catalogueDir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		onDisk[filepath.ToSlash(rel)] = b
		return err
	})
	require.NoError(t, err, "read %s", catalogueDir)

	const fix = "schemas/ is out of date with the Go types in messages/: run `make schemas` and commit the result"
	for _, f := range files {
		got, ok := onDisk[f.Path]
		if !assert.True(t, ok, "%s is missing. %s", f.Path, fix) {
			continue
		}
		assert.True(t, bytes.Equal(f.JSON, got), "%s differs from what the code generates. %s", f.Path, fix)
		delete(onDisk, f.Path)
	}
	var stale []string
	for path := range onDisk {
		stale = append(stale, path)
	}
	sort.Strings(stale)
	assert.Empty(t, stale, "files no type generates. %s", fix)
}

func TestSchemas_compile_as_draft_2020_12(t *testing.T) {
	files, compiled := catalogue(t)
	// 44 commands, 59 events and the envelope: a type missing from the
	// catalogue would go unnoticed by the other tests.
	require.Len(t, files, 104)
	ids := map[string]bool{}
	for _, f := range files {
		var head struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		require.NoError(t, json.Unmarshal(f.JSON, &head), f.Path)
		assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", head.Schema, f.Path)
		assert.Equal(t, f.ID, head.ID, f.Path)
		assert.True(t, strings.HasPrefix(f.ID, "urn:transit:"), "%s: a URN, no invented host", f.ID)
		assert.False(t, ids[f.ID], "%s: $id used twice", f.ID)
		ids[f.ID] = true
		assert.Contains(t, compiled, f.ID)
	}
	assert.Equal(t, "urn:transit:command:layer.published", messages.SchemaID(messages.CommandSchema, messages.LayerPublished))
	assert.Equal(t, "urn:transit:event:layer.published", messages.SchemaID(messages.EventSchema, messages.LayerPublishedEvent),
		"a command and an event sharing a name keep apart")
}

func TestSchemas_reject_what_the_metaschema_rejects(t *testing.T) {
	// The compile test above means something only if compiling checks
	// the metaschema.
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("urn:transit:test:bad", map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "maxLength": "ten",
	}))
	_, err := c.Compile("urn:transit:test:bad")
	require.Error(t, err)
}

// examplesOf returns the examples a schema file carries.
func examplesOf(t *testing.T, f messages.SchemaFile) []json.RawMessage {
	t.Helper()
	var s struct {
		Examples []json.RawMessage `json:"examples"`
	}
	require.NoError(t, json.Unmarshal(f.JSON, &s), f.Path)
	require.NotEmpty(t, s.Examples, "%s has no example", f.Path)
	return s.Examples
}

func TestSchemas_examples_are_valid(t *testing.T) {
	files, compiled := catalogue(t)
	for _, f := range files {
		t.Run(f.Path, func(t *testing.T) {
			for _, ex := range examplesOf(t, f) {
				doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ex))
				require.NoError(t, err)
				assert.NoError(t, compiled[f.ID].Validate(doc))
				if f.Kind == messages.CommandSchema {
					body := fmt.Sprintf(`{"id":"cmd-1","type":%q,"payload":%s}`, f.Type, ex)
					_, err := messages.Decode([]byte(body), messages.Meta{})
					assert.NoError(t, err, "transit refuses the schema's own example")
				}
			}
		})
	}
}

func TestSchemas_envelope_checks_the_payload_of_its_type(t *testing.T) {
	_, compiled := catalogue(t)
	envelope := compiled[messages.EnvelopeSchemaID]
	tests := []struct {
		Name  string
		Body  string
		Valid bool
	}{
		{Name: "allocate", Body: `{"id":"cmd-1","type":"sandbox.allocate","schema":1,"occurred_at":"2030-01-02T03:04:05Z","payload":{"track_id":"track-42"}}`, Valid: true},
		{Name: "sweep_without_payload", Body: `{"type":"sandbox.expire"}`, Valid: true},
		{Name: "extra_member_ignored", Body: `{"type":"sandbox.expire","trace":"x"}`, Valid: true},
		{Name: "payload_of_another_type", Body: `{"type":"sandbox.allocate","payload":{"sandbox_id":"0b5d7f1e-2c3a-4e8b-9f6d-1a2b3c4d5e6f"}}`},
		{Name: "allocate_without_payload", Body: `{"type":"sandbox.allocate"}`},
		{Name: "event_type", Body: `{"type":"sandbox.allocated","payload":{}}`},
		{Name: "unknown_schema_version", Body: `{"type":"sandbox.expire","schema":99}`},
		{Name: "control_character_in_id", Body: `{"id":"a\u0007","type":"sandbox.expire"}`},
		{Name: "id_too_long", Body: `{"id":"` + strings.Repeat("i", messages.MaxIDLength+1) + `","type":"sandbox.expire"}`},
		{Name: "occurred_at_not_a_time", Body: `{"type":"sandbox.expire","occurred_at":"yesterday"}`},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.Body))
			require.NoError(t, err)
			schemaErr := envelope.Validate(doc)
			_, decodeErr := messages.Decode([]byte(tc.Body), messages.Meta{ID: "msg-1"})
			if tc.Valid {
				assert.NoError(t, schemaErr)
				assert.NoError(t, decodeErr)
			} else {
				assert.Error(t, schemaErr)
				assert.Error(t, decodeErr)
			}
		})
	}
}

// goName is a Go identifier of two words or more (TrackID, ExecuteAt): a
// producer reading a description should never meet one.
var goName = regexp.MustCompile(`\b(?:[A-Z][a-z0-9]+){2,}\b|\b[A-Z][a-z0-9]+(?:ID|UUID|ARN)\b|\b\w+Payload\b`)

func TestSchemas_descriptions_speak_json(t *testing.T) {
	files, err := messages.Schemas()
	require.NoError(t, err)
	for _, f := range files {
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, e := range v {
					if s, ok := e.(string); ok && (k == "description" || k == "title") {
						assert.Empty(t, goName.FindAllString(s, -1), "%s: %q", f.Path, s)
					}
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		var doc any
		require.NoError(t, json.Unmarshal(f.JSON, &doc))
		walk(doc)
		assert.Contains(t, string(f.JSON), `"description"`, f.Path)
	}
}
