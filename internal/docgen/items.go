package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// itemType names the Go struct whose values are stored in a table.
type itemType struct {
	// Dir is the package's folder under the repository's root.
	Dir  string
	Name string
}

// itemTypes says which structs are stored in which table (by the table's
// name before the stack prefix). A table added to store.Tables without an
// entry here makes the generator fail, so no table goes undocumented.
var itemTypes = map[string][]itemType{
	"SandboxPool":  {{"store", "Sandbox"}, {"store", "IdempotencyClaim"}},
	"Audit":        {{"store", "auditItem"}},
	"Layers":       {{"store", "LayerVersion"}, {"store", "Build"}},
	"timers":       {{"store", "Shard"}, {"store", "Timer"}},
	"StreamLeases": {{"streams", "leaseItem"}},

	"Users":         {{"store", "User"}, {"store", "EmailClaim"}},
	"Orgs":          {{"store", "Org"}},
	"Projects":      {{"store", "Project"}},
	"Settings":      {{"store", "ScopeSettings"}},
	"Secrets":       {{"store", "Secret"}},
	"Agents":        {{"store", "Agent"}},
	"Tasks":         {{"store", "Task"}, {"store", "TaskClaim"}},
	"Queue":         {{"store", "QueueItem"}},
	"TaskEvents":    {{"store", "TaskEvent"}},
	"Logs":          {{"store", "LogEntry"}},
	"Notifications": {{"store", "Notification"}},

	"NucleusAppTable":   {{"store", "Account"}, {"store", "Schedule"}, {"store", "TargetedResource"}},
	"NucleusAuditTable": {{"store", "nucleusEntry"}},
}

// structDoc is an item struct as its source declares it.
type structDoc struct {
	Name string
	// File is the declaring file, relative to the repository's root.
	File   string
	Doc    string
	Fields []fieldDoc
}

// fieldDoc is one stored attribute of an item struct.
type fieldDoc struct {
	GoName string
	GoType string
	// Attribute is the DynamoDB attribute name (the dynamodbav tag, else
	// the field's name) and Type its DynamoDB type (S, N, BOOL, …).
	Attribute string
	Type      string
	// OmitEmpty: the attribute is stored only when the field is set.
	OmitEmpty bool
	Doc       string
}

// pkgDoc is what docgen reads of one package: its struct declarations and
// the DynamoDB type each of its named types marshals to.
type pkgDoc struct {
	dir     string
	structs map[string]*ast.TypeSpec
	files   map[string]string // type name → declaring file
	docs    map[string]string // type name → doc comment
	// marshals maps a named type with a MarshalDynamoDBAttributeValue
	// method to the AttributeValueMember it returns (S, N, …).
	marshals map[string]string
}

func parsePackage(root, dir string) (*pkgDoc, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		return nil, err
	}
	p := &pkgDoc{dir: dir, structs: map[string]*ast.TypeSpec{}, files: map[string]string{}, docs: map[string]string{}, marshals: map[string]string{}}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		rel := filepath.ToSlash(filepath.Join(dir, filepath.Base(path)))
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok {
						continue
					}
					doc := ts.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					p.structs[ts.Name.Name] = ts
					p.files[ts.Name.Name] = rel
					p.docs[ts.Name.Name] = oneLine(doc.Text())
				}
			case *ast.FuncDecl:
				if d.Recv == nil || d.Name.Name != "MarshalDynamoDBAttributeValue" || d.Body == nil {
					continue
				}
				if member := returnedMember(d.Body); member != "" {
					p.marshals[receiverName(d.Recv.List[0].Type)] = member
				}
			}
		}
	}
	return p, nil
}

// returnedMember finds the types.AttributeValueMemberX a marshaler builds.
func returnedMember(body *ast.BlockStmt) string {
	member := ""
	ast.Inspect(body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && member == "" {
			if m, ok := strings.CutPrefix(sel.Sel.Name, "AttributeValueMember"); ok {
				member = m
			}
		}
		return member == ""
	})
	return member
}

func receiverName(e ast.Expr) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// item reads the struct name of p as the table's documentation shows it.
func (p *pkgDoc) item(name string) (structDoc, error) {
	ts, ok := p.structs[name]
	if !ok {
		return structDoc{}, fmt.Errorf("%s: no type %s", p.dir, name)
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return structDoc{}, fmt.Errorf("%s: %s is not a struct", p.dir, name)
	}
	sd := structDoc{Name: name, File: p.files[name], Doc: p.docs[name]}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			return structDoc{}, fmt.Errorf("%s.%s: embedded fields are not supported by docgen", name, types.ExprString(f.Type))
		}
		tag := ""
		if f.Tag != nil {
			tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("dynamodbav")
		}
		opts := strings.Split(tag, ",")
		if opts[0] == "-" {
			continue
		}
		doc := f.Doc.Text()
		if doc == "" {
			doc = f.Comment.Text()
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue // attributevalue skips unexported fields
			}
			if strings.TrimSpace(doc) == "" {
				return structDoc{}, fmt.Errorf("%s: %s.%s has no doc comment: the docs take each attribute's meaning from it", sd.File, name, n.Name)
			}
			ddbType, err := p.dynamoType(f.Type)
			if err != nil {
				return structDoc{}, fmt.Errorf("%s: %s.%s: %w", sd.File, name, n.Name, err)
			}
			attr := opts[0]
			if attr == "" {
				attr = n.Name
			}
			sd.Fields = append(sd.Fields, fieldDoc{
				GoName:    n.Name,
				GoType:    types.ExprString(f.Type),
				Attribute: attr,
				Type:      ddbType,
				OmitEmpty: contains(opts[1:], "omitempty"),
				Doc:       meaning(n.Name, doc),
			})
		}
	}
	return sd, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// dynamoType is the DynamoDB type attributevalue.Marshal gives a field of
// type e, by its default rules.
func (p *pkgDoc) dynamoType(e ast.Expr) (string, error) {
	switch t := e.(type) {
	case *ast.StarExpr:
		return p.dynamoType(t.X)
	case *ast.ArrayType:
		if id, ok := t.Elt.(*ast.Ident); ok && id.Name == "byte" {
			return "B", nil
		}
		return "L", nil
	case *ast.MapType, *ast.StructType:
		return "M", nil
	case *ast.SelectorExpr:
		if x, ok := t.X.(*ast.Ident); ok && x.Name == "time" && t.Sel.Name == "Time" {
			return "S", nil // RFC 3339
		}
	case *ast.Ident:
		switch t.Name {
		case "string":
			return "S", nil
		case "bool":
			return "BOOL", nil
		case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
			return "N", nil
		}
		if m, ok := p.marshals[t.Name]; ok {
			return m, nil
		}
		if ts, ok := p.structs[t.Name]; ok {
			return p.dynamoType(ts.Type)
		}
	}
	return "", fmt.Errorf("docgen does not know the DynamoDB type of %s", types.ExprString(e))
}

// meaning is a field's doc comment as a sentence about its attribute:
// "Status is the sandbox's state." → "The sandbox's state."
func meaning(goName, doc string) string {
	s := oneLine(doc)
	if rest, ok := strings.CutPrefix(s, goName+" "); ok {
		for _, verb := range []string{"is ", "are "} {
			if r, ok := strings.CutPrefix(rest, verb); ok {
				rest = r
				break
			}
		}
		s = rest
		// "lyr#<region>…" is a value pattern: its case matters.
		if word, _, _ := strings.Cut(s, " "); !strings.ContainsAny(word, "#<_.") {
			s = upperFirst(s)
		}
	}
	return s
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// oneLine joins a comment's lines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// itemDocs reads the item structs of every table named in itemTypes.
func itemDocs(root string) (map[string][]structDoc, error) {
	pkgs := map[string]*pkgDoc{}
	out := map[string][]structDoc{}
	tables := make([]string, 0, len(itemTypes))
	for t := range itemTypes {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, table := range tables {
		for _, it := range itemTypes[table] {
			p, ok := pkgs[it.Dir]
			if !ok {
				var err error
				if p, err = parsePackage(root, it.Dir); err != nil {
					return nil, err
				}
				pkgs[it.Dir] = p
			}
			sd, err := p.item(it.Name)
			if err != nil {
				return nil, err
			}
			out[table] = append(out[table], sd)
		}
	}
	return out, nil
}
