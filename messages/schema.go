package messages

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
)

// The JSON Schema catalogue: one schema per command payload, per event
// payload and for the envelope, generated from the Go types so producers
// get the contract transit enforces. Validate() stays the check transit
// runs (Decode is on the hot path); a test keeps the two in agreement.

// SchemaKind says what a generated schema describes.
type SchemaKind string

const (
	CommandSchema  SchemaKind = "command"
	EventSchema    SchemaKind = "event"
	EnvelopeSchema SchemaKind = "envelope"
)

// EnvelopeSchemaID is the $id of the envelope's schema.
const EnvelopeSchemaID = "urn:transit:envelope"

// SchemaID is the $id of the schema of a command or event type. Commands
// and events may share a name, so the kind is part of it.
func SchemaID(kind SchemaKind, t Type) string {
	return "urn:transit:" + string(kind) + ":" + string(t)
}

// SchemaFile is one generated schema.
type SchemaFile struct {
	// Path is where it lives in the catalogue, e.g.
	// "commands/sandbox.allocate.json".
	Path string
	Kind SchemaKind
	Type Type // empty for the envelope
	ID   string
	JSON []byte // indented, with a final newline
}

// Schemas generates the catalogue: the envelope, then every command and
// every event, each sorted by type.
func Schemas() ([]SchemaFile, error) {
	g, err := newGenerator()
	if err != nil {
		return nil, err
	}
	env, err := g.envelope()
	if err != nil {
		return nil, err
	}
	files := []SchemaFile{env}
	for _, kind := range []SchemaKind{CommandSchema, EventSchema} {
		catalogue := commands
		if kind == EventSchema {
			catalogue = events
		}
		for _, t := range typesOf(catalogue, "") {
			f, err := g.message(kind, t, catalogue[t])
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
	}
	return files, nil
}

// eventReasons are the reasons each rejection event can carry.
var eventReasons = map[Type][]string{
	SandboxAllocationRejected: {ReasonPoolExhausted},
	SandboxDeletionRejected:   {ReasonNotFound, ReasonWrongState, ReasonNotOwner, ReasonExpired},
	SandboxReinstateRejected:  {ReasonNotFound, ReasonWrongState},
	SandboxRetireRejected:     {ReasonNotFound, ReasonWrongState, ReasonListed},
	LayerPublishRejected:      {ReasonAlreadyRecorded},
	BuildRecordRejected:       {ReasonAlreadyRecorded},
	LayerDeleteRejected:       {ReasonNotFound, ReasonIsLatest, ReasonWrongState},
}

// nestedSubjects replace the Go name that opens a nested type's doc
// comment; a producer never sees Go type names.
var nestedSubjects = map[string]string{
	"InventoryItem":   "Each entry",
	"LogLine":         "Each line",
	"ExecutionResult": "Each result",
}

const (
	pkgPath = "transit/messages"
	// goOnlyKey carries, during generation, the rules a type's
	// JSONSchemaExtend says only Validate checks; they end up in the
	// schema's description.
	goOnlyKey = "x-go-only"
)

type generator struct {
	types  map[string]string // Go type name → doc comment
	fields map[string]string // "Type.Field" → doc comment
	names  map[string]string // Go field name → JSON name, to translate comments
}

//go:embed envelope.go layer.go nucleus.go org.go sandbox.go task.go timer.go
var sources embed.FS

// newGenerator reads the doc comments of the payload types from the
// package's own source, embedded so the binary can generate the schemas
// anywhere.
func newGenerator() (*generator, error) {
	g := &generator{types: map[string]string{}, fields: map[string]string{}, names: map[string]string{}}
	entries, err := sources.ReadDir(".")
	if err != nil {
		return nil, fmt.Errorf("read embedded sources: %w", err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		src, err := sources.ReadFile(e.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded %s: %w", e.Name(), err)
		}
		f, err := parser.ParseFile(fset, e.Name(), src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse embedded %s: %w", e.Name(), err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				g.types[ts.Name.Name] = doc.Text()
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, field := range st.Fields.List {
					text := field.Doc.Text()
					if text == "" {
						text = field.Comment.Text()
					}
					for _, n := range field.Names {
						g.fields[ts.Name.Name+"."+n.Name] = text
					}
				}
			}
		}
	}
	roots := []reflect.Type{reflect.TypeFor[Envelope]()}
	for _, catalogue := range []map[Type]spec{commands, events} {
		for _, s := range catalogue {
			roots = append(roots, reflect.TypeOf(s.new()))
		}
	}
	for _, t := range roots {
		if err := g.collectNames(t); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// collectNames maps the Go names of t's fields, and of the structs it
// holds, to their JSON names.
func (g *generator) collectNames(t reflect.Type) error {
	t = deref(t)
	if t.Kind() != reflect.Struct || t.PkgPath() != pkgPath {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name := jsonName(f); name != "" && !f.Anonymous {
			if prev, ok := g.names[f.Name]; ok && prev != name {
				return fmt.Errorf("field %s is %q in one type and %q in another: comments cannot name it", f.Name, prev, name)
			}
			g.names[f.Name] = name
		}
		if err := g.collectNames(f.Type); err != nil {
			return err
		}
	}
	return nil
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

var goIdentifier = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\b`)

// prose turns a doc comment into a description: paragraphs on one line
// each, Go field names replaced by JSON names, and a leading Go type name
// by subject.
func (g *generator) prose(text, goName, subject string) string {
	text = strings.TrimSpace(text)
	if subject != "" {
		if rest, ok := strings.CutPrefix(text, goName+" "); ok {
			text = subject + " " + rest
		}
	}
	paragraphs := strings.Split(text, "\n\n")
	for i, p := range paragraphs {
		paragraphs[i] = strings.Join(strings.Fields(p), " ")
	}
	text = strings.Join(paragraphs, "\n\n")
	var out strings.Builder
	last := 0
	for _, m := range goIdentifier.FindAllStringIndex(text, -1) {
		w := text[m[0]:m[1]]
		name, ok := g.names[w]
		// An all-capitals word names a field only as the subject: inside
		// a sentence ID or ARN is the acronym.
		if !ok || (m[0] > 0 && strings.ToUpper(w) == w) {
			continue
		}
		out.WriteString(text[last:m[0]])
		out.WriteString(name)
		last = m[1]
	}
	out.WriteString(text[last:])
	return out.String()
}

// lookup gives the reflector the description of a type (field "") or of
// a field; a field without a comment takes its type's.
func (g *generator) lookup(t reflect.Type, field string) string {
	if t.PkgPath() != pkgPath {
		return ""
	}
	if field == "" {
		return g.prose(g.types[t.Name()], t.Name(), nestedSubjects[t.Name()])
	}
	if text := g.fields[t.Name()+"."+field]; text != "" {
		return g.prose(text, "", "")
	}
	f, ok := t.FieldByName(field)
	if !ok {
		return ""
	}
	ft := deref(f.Type)
	if ft.PkgPath() != pkgPath {
		return ""
	}
	return g.prose(g.types[ft.Name()], ft.Name(), jsonName(f))
}

func (g *generator) reflector(open bool) *jsonschema.Reflector {
	return &jsonschema.Reflector{
		Anonymous: true,
		// Inline every nested type: each file stands alone and reads top
		// to bottom.
		DoNotReference: true,
		// Events and the envelope may grow members their readers should
		// ignore; a command payload is decoded with unknown fields refused.
		AllowAdditionalProperties: open,
		LookupComment:             g.lookup,
	}
}

func (g *generator) message(kind SchemaKind, t Type, sp spec) (SchemaFile, error) {
	payload := sp.new()
	goType := reflect.TypeOf(payload).Elem()
	s := g.reflector(kind == EventSchema).Reflect(payload)
	s.ID = jsonschema.ID(SchemaID(kind, t))
	s.Title = fmt.Sprintf("%s %s payload", t, kind)
	s.Description = g.prose(g.types[goType.Name()], goType.Name(), string(t))
	if kind == CommandSchema {
		s.Description += "\n\nSent to the <prefix>-" + CommandQueue(sp.domain) + " queue (or the topic of that name) as the payload of the envelope (" +
			EnvelopeSchemaID + "), or as the whole body with the type in the type message attribute."
	} else {
		s.Description += "\n\nPublished on the <prefix>-" + EventTopic(sp.domain) + " topic as the payload of the envelope (" + EnvelopeSchemaID + ")."
	}
	rules := goOnlyRules(s)
	if kind == CommandSchema && hasInteger(s) {
		rules = append(rules, "integers are written without a fraction or exponent (1, not 1.0 or 1e0)")
	}
	if len(rules) > 0 {
		s.Description += "\n\nChecked by transit, beyond this schema: " + strings.Join(rules, "; ") + "."
	}
	if kind == EventSchema {
		eventKeywords(s, t)
	}
	ex, ok := examples[SchemaID(kind, t)]
	if !ok {
		return SchemaFile{}, fmt.Errorf("%s %s has no example", kind, t)
	}
	raw, err := json.Marshal(ex)
	if err != nil {
		return SchemaFile{}, fmt.Errorf("encode the example of %s %s: %w", kind, t, err)
	}
	s.Examples = []any{json.RawMessage(raw)}
	return schemaFile(s, string(kind)+"s/"+string(t)+".json", kind, t)
}

// eventKeywords adds what an event's Go type cannot say: the reasons a
// rejection carries, and that sandbox IDs are UUIDs.
func eventKeywords(s *jsonschema.Schema, t Type) {
	if reasons, ok := eventReasons[t]; ok {
		p := property(s, "reason")
		for _, r := range reasons {
			p.Enum = append(p.Enum, r)
		}
	}
	if p, ok := s.Properties.Get("sandbox_id"); ok {
		p.Format = "uuid"
	}
	for _, name := range []string{"added", "staled"} {
		if p, ok := s.Properties.Get(name); ok && t == SandboxSynced {
			p.Items.Format = "uuid"
		}
	}
}

func (g *generator) envelope() (SchemaFile, error) {
	s := g.reflector(true).Reflect(&Envelope{})
	s.ID = EnvelopeSchemaID
	s.Title = "transit envelope"
	s.Description = g.prose(g.types["Envelope"], "Envelope", "The envelope") +
		"\n\nThis schema describes a command's envelope: type names a command, and payload must match that command's schema (" +
		SchemaID(CommandSchema, "<type>") + "). A command may instead be sent as its payload alone with the type in the type message attribute; " +
		"type may be left out of an envelope only when that attribute names it. Events carry the same members with an event type, " +
		"every member set. Other members are ignored."
	for _, name := range []string{"id", "correlation_id"} {
		textSchema(property(s, name), MaxIDLength)
	}
	property(s, "correlation_id").Description = "correlation_id is shared by every message a first command caused; it defaults to the correlation_id message attribute, else the id."
	property(s, "causation_id").Description = "causation_id is, on an event, the id of the command that caused it."
	property(s, "occurred_at").Pattern = dateTimePattern(`[0-9]{4}`)
	property(s, "occurred_at").Description = "occurred_at is when the message's sender says it happened, RFC 3339."
	optional(s, "occurred_at", nil)
	optional(s, "payload", nil)
	ver := property(s, "schema")
	ver.Enum = []any{Schema}
	ver.Description = fmt.Sprintf("schema is the envelope version; transit reads version %d, the default, and dead-letters any other.", Schema)
	property(s, "payload").Description = "payload is the command's or event's own members, as its schema describes; a command without one has an empty payload."
	typ := property(s, "type")
	typ.Description = "type names the command."
	for _, t := range typesOf(commands, "") {
		typ.Enum = append(typ.Enum, t)
		then := &jsonschema.Schema{Properties: jsonschema.NewProperties()}
		then.Properties.Set("payload", &jsonschema.Schema{Ref: SchemaID(CommandSchema, t)})
		if p, ok := NewCommandPayload(t); ok && hasRequired(g.reflector(false).Reflect(p)) {
			then.Required = []string{"payload"}
		}
		cond := &jsonschema.Schema{Properties: jsonschema.NewProperties(), Required: []string{"type"}}
		cond.Properties.Set("type", &jsonschema.Schema{Const: t})
		s.AllOf = append(s.AllOf, &jsonschema.Schema{If: cond, Then: then})
	}
	ex, err := NewCommand("4b6c1f0e-8d2a-4c55-9b1e-2f7a9d3c6e10", SandboxAllocate, examples[SchemaID(CommandSchema, SandboxAllocate)], exampleTime)
	if err != nil {
		return SchemaFile{}, fmt.Errorf("envelope example: %w", err)
	}
	s.Examples = []any{json.RawMessage(ex)}
	return schemaFile(s, "envelope.json", EnvelopeSchema, "")
}

func hasRequired(s *jsonschema.Schema) bool { return len(s.Required) > 0 }

// hasInteger reports whether s or any schema in it is an integer.
func hasInteger(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	if s.Type == "integer" || isNullable(s, "integer") || hasInteger(s.Items) {
		return true
	}
	if s.Properties != nil {
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			if hasInteger(p.Value) {
				return true
			}
		}
	}
	return false
}

func isNullable(s *jsonschema.Schema, typ string) bool {
	types, _ := s.Extras["type"].([]string)
	return len(types) > 0 && types[0] == typ
}

func goOnlyRules(s *jsonschema.Schema) []string {
	rules, _ := s.Extras[goOnlyKey].([]string)
	delete(s.Extras, goOnlyKey)
	return rules
}

func schemaFile(s *jsonschema.Schema, path string, kind SchemaKind, t Type) (SchemaFile, error) {
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return SchemaFile{}, fmt.Errorf("encode schema %s: %w", path, err)
	}
	return SchemaFile{Path: path, Kind: kind, Type: t, ID: string(s.ID), JSON: append(unescapeHTML(out), '\n')}, nil
}

// unescapeHTML undoes encoding/json's escaping of <, > and &, which the
// schema library's own marshalling applies: patterns and descriptions stay
// readable. A \u sequence is only rewritten when its backslash is not
// itself escaped.
func unescapeHTML(b []byte) []byte {
	var out bytes.Buffer
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out.WriteByte(b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c", "003e", "0026":
				r, _ := strconv.ParseUint(string(b[i+2:i+6]), 16, 8)
				out.WriteByte(byte(r))
				i += 5
				continue
			}
		}
		out.Write(b[i : i+2])
		i++
	}
	return out.Bytes()
}

// Helpers for the payload types' JSONSchemaExtend methods. Each mirrors a
// check of Validate, from the same constants and patterns.

// property returns the schema of a property; naming one the type lacks is
// a bug the catalogue tests catch.
func property(s *jsonschema.Schema, name string) *jsonschema.Schema {
	p, ok := s.Properties.Get(name)
	if !ok {
		panic(fmt.Sprintf("messages: schema has no property %q", name))
	}
	return p
}

// noControlCharacters is checkText's character rule.
const noControlCharacters = `^[^\x00-\x1f\x7f]*$`

// textSchema mirrors checkText.
func textSchema(p *jsonschema.Schema, max int) {
	p.MaxLength = count(max)
	p.Pattern = noControlCharacters
}

// proseSchema mirrors checkProse.
func proseSchema(p *jsonschema.Schema, max int) {
	p.MaxLength = count(max)
	p.Pattern = `^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$`
}

// requiredProseSchema mirrors requiredProse.
func requiredProseSchema(p *jsonschema.Schema, max int) {
	proseSchema(p, max)
	p.MinLength = count(1)
}

// requiredTextSchema mirrors required.
func requiredTextSchema(p *jsonschema.Schema, max int) {
	textSchema(p, max)
	p.MinLength = count(1)
}

// patternSchema mirrors required followed by a pattern that admits no
// control character.
func patternSchema(p *jsonschema.Schema, re *regexp.Regexp, max int) {
	p.MinLength = count(1)
	p.MaxLength = count(max)
	p.Pattern = re.String()
}

// optionalPattern also admits the empty string: re must be anchored at
// both ends.
func optionalPattern(re *regexp.Regexp) string {
	inner := strings.TrimSuffix(strings.TrimPrefix(re.String(), "^"), "$")
	return "^(?:" + inner + ")?$"
}

// nullable admits null: encoding/json leaves a field untouched for null,
// so Validate sees it as absent.
func nullable(p *jsonschema.Schema) {
	if p.Type == "" {
		panic("messages: nullable needs a typed schema")
	}
	if p.Extras == nil {
		p.Extras = map[string]any{}
	}
	p.Extras["type"] = []string{p.Type, "null"}
	p.Type = ""
}

// optional drops a member the generator thought required (its json tag
// has no omitempty) because Validate accepts its absence; def is what
// absence means, if anything.
func optional(s *jsonschema.Schema, name string, def any) {
	kept := s.Required[:0]
	for _, r := range s.Required {
		if r != name {
			kept = append(kept, r)
		}
	}
	s.Required = kept
	if def != nil {
		property(s, name).Default = def
	}
}

func integerRange(p *jsonschema.Schema, min, max int64) {
	p.Minimum = json.Number(strconv.FormatInt(min, 10))
	p.Maximum = json.Number(strconv.FormatInt(max, 10))
}

// goOnly records rules Validate checks that JSON Schema cannot express;
// the schema's description lists them.
func goOnly(s *jsonschema.Schema, rules ...string) {
	if s.Extras == nil {
		s.Extras = map[string]any{}
	}
	prev, _ := s.Extras[goOnlyKey].([]string)
	s.Extras[goOnlyKey] = append(prev, rules...)
}

func count(n int) *uint64 {
	u := uint64(n)
	return &u
}

// number writes f as encoding/json would, so the schema's bound is the
// very float64 Validate compares with.
func number(f float64) json.Number {
	b, _ := json.Marshal(f)
	return json.Number(b)
}

// dateTimePattern is the RFC 3339 date-time Go's time.Time reads, with
// year as given; the calendar (no 30 February) is left to the date-time
// format.
func dateTimePattern(year string) string {
	return `^` + year + `-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$`
}
