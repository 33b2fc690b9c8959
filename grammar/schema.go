package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// SchemaOptions change how a JSON Schema becomes a grammar.
type SchemaOptions struct {
	// Strict allows an object only the properties it lists, even where
	// additionalProperties is absent or true (OpenAI's strict mode).
	Strict bool
}

// The rules every schema grammar shares, as llama.cpp's
// json-schema-to-grammar writes them: whitespace is bounded, so that a
// grammar of bounded values has bounded sentences.
var primitives = []struct{ name, body string }{
	{"space", `| " " | "\n" [ \t]{0,20}`},
	{"boolean", `("true" | "false") space`},
	{"null", `"null" space`},
	{"char", `[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`},
	{"string", `"\"" char* "\"" space`},
	{"integer", `("-"? ([0-9] | [1-9] [0-9]{0,15})) space`},
	{"number", `("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? space`},
	{"value", `object | array | string | number | boolean | null`},
	{"object", `"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space`},
	{"array", `"[" space ( value ("," space value)* )? "]" space`},
	{"date", `[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`},
	{"time", `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`},
	{"uuid", `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`},
}

// JSONObjectGBNF is the grammar of any JSON object (OpenAI's
// response_format json_object).
func JSONObjectGBNF() string {
	var b strings.Builder
	b.WriteString("root ::= object\n")
	for _, p := range primitives {
		fmt.Fprintf(&b, "%s ::= %s\n", p.name, p.body)
	}
	return b.String()
}

// JSONObject is the parsed JSONObjectGBNF.
func JSONObject() *Grammar {
	g, err := Parse(JSONObjectGBNF())
	if err != nil {
		panic(err) // a constant that does not parse is a bug caught by every test
	}
	return g
}

// FromJSONSchema is the grammar of the JSON documents schema describes
// (SchemaToGBNF).
func FromJSONSchema(schema []byte, o SchemaOptions) (*Grammar, error) {
	src, err := SchemaToGBNF(schema, o)
	if err != nil {
		return nil, err
	}
	g, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("grammar: schema's grammar: %w", err)
	}
	return g, nil
}

// SchemaToGBNF writes a GBNF grammar whose sentences are JSON documents
// valid under schema, by construction. It knows type (and lists of types),
// properties with required (in the order declared; required ones always
// written, the others optional), additionalProperties, enum, const, items,
// minItems/maxItems, minLength/maxLength, minimum/maximum and their
// exclusive forms for integers, anyOf/oneOf (oneOf is not held to exactly
// one), $ref into $defs/definitions, and the formats date, time, date-time
// and uuid, and pattern (the common subset of regular expressions; see
// pattern). A keyword it cannot hold a document to (allOf, not, number
// bounds, …) is an error naming it; annotations are ignored.
func SchemaToGBNF(schema []byte, o SchemaOptions) (string, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", fmt.Errorf("grammar: schema: %w", err)
	}
	// "root" is claimed first: no rule named after a property may take it.
	c := &conv{o: o, root: root, rules: map[string]string{"root": ""}, order: []string{"root"}, refs: map[string]string{}}
	name, err := c.visit(root, "#", "root")
	if err != nil {
		return "", err
	}
	c.rules["root"] = name
	var b strings.Builder
	for _, n := range c.order {
		fmt.Fprintf(&b, "%s ::= %s\n", n, c.rules[n])
	}
	for _, p := range primitives {
		if _, ok := c.rules[p.name]; !ok {
			fmt.Fprintf(&b, "%s ::= %s\n", p.name, p.body)
		}
	}
	return b.String(), nil
}

// obj is a JSON object with its keys in document order.
type obj struct {
	keys []string
	vals map[string]any
}

func (o *obj) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered reads JSON keeping object key order (properties are
// written in the order declared).
func decodeOrdered(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the schema")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > 256 {
		return nil, errors.New("nested more than 256 deep")
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &obj{vals: map[string]any{}}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		var a []any
		for d.More() {
			v, err := decodeValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	}
	return t, nil
}

type conv struct {
	o     SchemaOptions
	root  any
	rules map[string]string
	order []string
	refs  map[string]string
}

var nonName = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// add defines a rule named after hint (made unique) and returns its name;
// a rule with the same body and name is shared.
func (c *conv) add(hint, body string) string {
	base := strings.Trim(nonName.ReplaceAllString(hint, "-"), "-")
	if base == "" {
		base = "r"
	}
	name := base
	for i := 1; ; i++ {
		old, taken := c.rules[name]
		if !taken && !slices.ContainsFunc(primitives, func(p struct{ name, body string }) bool { return p.name == name }) {
			break
		}
		if taken && old == body {
			return name
		}
		name = base + "-" + strconv.Itoa(i)
	}
	c.rules[name] = body
	c.order = append(c.order, name)
	return name
}

// reserve claims a name for a rule whose body comes later (a $ref, which
// may refer to itself).
func (c *conv) reserve(hint string) string {
	name := c.add(hint, "\x00pending"+hint)
	return name
}

// unsupported are the keywords a document could not be held to.
var unsupported = []string{"allOf", "not", "if", "then", "else", "patternProperties", "propertyNames",
	"dependentRequired", "dependentSchemas", "dependencies", "minProperties", "maxProperties", "multipleOf",
	"prefixItems", "contains", "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef"}

// visit returns the name of a rule for the schema s found at path.
func (c *conv) visit(s any, path, hint string) (string, error) {
	switch s := s.(type) {
	case bool:
		if s {
			return "value", nil
		}
		return "", fmt.Errorf("grammar: schema %s: false allows nothing", path)
	case *obj:
		return c.visitObj(s, path, hint)
	}
	return "", fmt.Errorf("grammar: schema %s: expected an object or a boolean, got %s", path, jsonKind(s))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case *obj:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (c *conv) visitObj(s *obj, path, hint string) (string, error) {
	for _, k := range unsupported {
		if _, ok := s.get(k); ok {
			return "", fmt.Errorf("grammar: schema %s: keyword %q is not supported", path, k)
		}
	}
	if v, ok := s.get("uniqueItems"); ok && v == true {
		return "", fmt.Errorf("grammar: schema %s: keyword \"uniqueItems\" is not supported", path)
	}
	if r, ok := s.get("$ref"); ok {
		ref, ok := r.(string)
		if !ok {
			return "", fmt.Errorf("grammar: schema %s: $ref is %s, not a string", path, jsonKind(r))
		}
		return c.ref(ref, path)
	}
	if v, ok := s.get("const"); ok {
		return c.add(hint, literal(v)+" space"), nil
	}
	if v, ok := s.get("enum"); ok {
		vals, ok := v.([]any)
		if !ok || len(vals) == 0 {
			return "", fmt.Errorf("grammar: schema %s: enum must be a non-empty array", path)
		}
		var alts []string
		for _, x := range vals {
			alts = append(alts, literal(x))
		}
		return c.add(hint, "("+strings.Join(alts, " | ")+") space"), nil
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		subs, ok := v.([]any)
		if !ok || len(subs) == 0 {
			return "", fmt.Errorf("grammar: schema %s: %s must be a non-empty array", path, k)
		}
		var alts []string
		for i, sub := range subs {
			n, err := c.visit(sub, fmt.Sprintf("%s/%s/%d", path, k, i), fmt.Sprintf("%s-%d", hint, i))
			if err != nil {
				return "", err
			}
			alts = append(alts, n)
		}
		return c.add(hint, strings.Join(alts, " | ")), nil
	}
	t, hasType := s.get("type")
	switch t := t.(type) {
	case []any:
		var alts []string
		for i, x := range t {
			name, ok := x.(string)
			if !ok {
				return "", fmt.Errorf("grammar: schema %s/type/%d: expected a type name, got %s", path, i, jsonKind(x))
			}
			n, err := c.typed(s, name, path, hint+"-"+name)
			if err != nil {
				return "", err
			}
			alts = append(alts, n)
		}
		if len(alts) == 0 {
			return "", fmt.Errorf("grammar: schema %s: empty type list", path)
		}
		return c.add(hint, strings.Join(alts, " | ")), nil
	case string:
		return c.typed(s, t, path, hint)
	}
	if hasType {
		return "", fmt.Errorf("grammar: schema %s: type is %s, not a string or a list", path, jsonKind(t))
	}
	switch {
	case has(s, "properties", "additionalProperties", "required"):
		return c.typed(s, "object", path, hint)
	case has(s, "items", "minItems", "maxItems"):
		return c.typed(s, "array", path, hint)
	case has(s, "minLength", "maxLength", "format", "pattern"):
		return c.typed(s, "string", path, hint)
	case has(s, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
		return c.typed(s, "number", path, hint)
	}
	return "value", nil
}

func has(s *obj, keys ...string) bool {
	for _, k := range keys {
		if _, ok := s.get(k); ok {
			return true
		}
	}
	return false
}

func (c *conv) ref(ref, path string) (string, error) {
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return "", fmt.Errorf("grammar: schema %s: $ref %q: only references into the same document (#/...) are supported", path, ref)
	}
	var target any = c.root
	hint := "ref"
	if p := strings.TrimPrefix(ref, "#"); p != "" {
		if !strings.HasPrefix(p, "/") {
			return "", fmt.Errorf("grammar: schema %s: $ref %q is not a JSON pointer", path, ref)
		}
		for _, part := range strings.Split(p[1:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			o, ok := target.(*obj)
			if !ok {
				return "", fmt.Errorf("grammar: schema %s: $ref %q: %q is not inside an object", path, ref, part)
			}
			if target, ok = o.get(part); !ok {
				return "", fmt.Errorf("grammar: schema %s: $ref %q: no %q", path, ref, part)
			}
			hint = part
		}
	}
	name := c.reserve(hint)
	c.refs[ref] = name
	body, err := c.visit(target, ref, name+"-body")
	if err != nil {
		return "", err
	}
	c.rules[name] = body
	return name, nil
}

func (c *conv) typed(s *obj, t, path, hint string) (string, error) {
	switch t {
	case "null", "boolean":
		return t, nil
	case "string":
		return c.str(s, path, hint)
	case "integer":
		return c.integer(s, path, hint)
	case "number":
		if has(s, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") {
			return "", fmt.Errorf("grammar: schema %s: bounds on a number are not supported (an integer's are)", path)
		}
		return "number", nil
	case "array":
		return c.array(s, path, hint)
	case "object":
		return c.object(s, path, hint)
	}
	return "", fmt.Errorf("grammar: schema %s: unknown type %q", path, t)
}

func (c *conv) count(s *obj, key, path string) (int, bool, error) {
	v, ok := s.get(key)
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	i, err := strconv.ParseInt(string(n), 10, 64)
	if !isNum || err != nil || i < 0 {
		return 0, false, fmt.Errorf("grammar: schema %s: %s must be a non-negative integer", path, key)
	}
	if i > maxRepeat {
		return 0, false, fmt.Errorf("grammar: schema %s: %s %d is over %d", path, key, i, maxRepeat)
	}
	return int(i), true, nil
}

func repeatSuffix(lo int, hi int, hasHi bool) string {
	switch {
	case !hasHi && lo == 0:
		return "*"
	case !hasHi && lo == 1:
		return "+"
	case !hasHi:
		return fmt.Sprintf("{%d,}", lo)
	case lo == hi:
		return fmt.Sprintf("{%d}", lo)
	}
	return fmt.Sprintf("{%d,%d}", lo, hi)
}

func (c *conv) str(s *obj, path, hint string) (string, error) {
	if re, ok := s.get("pattern"); ok {
		str, isStr := re.(string)
		switch {
		case !isStr:
			return "", fmt.Errorf("grammar: schema %s: pattern is %s, not a string", path, jsonKind(re))
		case has(s, "minLength", "maxLength", "format"):
			return "", fmt.Errorf("grammar: schema %s: pattern with minLength, maxLength or format is not supported (put the lengths in the pattern)", path)
		}
		return c.pattern(str, path, hint)
	}
	if f, ok := s.get("format"); ok {
		switch f {
		case "date", "time", "uuid":
			return c.add(f.(string)+"-string", `"\"" `+f.(string)+` "\"" space`), nil
		case "date-time":
			return c.add("date-time-string", `"\"" date "T" time "\"" space`), nil
		}
	}
	lo, _, err := c.count(s, "minLength", path)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := c.count(s, "maxLength", path)
	if err != nil {
		return "", err
	}
	if hasHi && hi < lo {
		return "", fmt.Errorf("grammar: schema %s: maxLength %d < minLength %d", path, hi, lo)
	}
	if lo == 0 && !hasHi {
		return "string", nil
	}
	return c.add(hint, `"\"" char`+repeatSuffix(lo, hi, hasHi)+` "\"" space`), nil
}

func (c *conv) array(s *obj, path, hint string) (string, error) {
	item := "value"
	if it, ok := s.get("items"); ok {
		var err error
		if item, err = c.visit(it, path+"/items", hint+"-item"); err != nil {
			return "", err
		}
	}
	lo, _, err := c.count(s, "minItems", path)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := c.count(s, "maxItems", path)
	if err != nil {
		return "", err
	}
	if hasHi && hi < lo {
		return "", fmt.Errorf("grammar: schema %s: maxItems %d < minItems %d", path, hi, lo)
	}
	if hasHi && hi == 0 {
		return c.add(hint, `"[" space "]" space`), nil
	}
	more := `("," space ` + item + `)` + repeatSuffix(max(lo-1, 0), hi-1, hasHi)
	body := item + " " + more
	if lo == 0 {
		body = "(" + body + ")?"
	}
	return c.add(hint, `"[" space `+body+` "]" space`), nil
}

// object writes the properties in the order declared, each optional one
// possibly left out, with commas between those written: rest_i is the
// list from property i on when none was written yet, so that the first
// one written has no comma before it.
func (c *conv) object(s *obj, path, hint string) (string, error) {
	props, _ := s.get("properties")
	po, ok := props.(*obj)
	if props != nil && !ok {
		return "", fmt.Errorf("grammar: schema %s: properties must be an object", path)
	}
	required := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return "", fmt.Errorf("grammar: schema %s: required must be an array of names", path)
		}
		for _, x := range list {
			name, ok := x.(string)
			if !ok {
				return "", fmt.Errorf("grammar: schema %s: required must be an array of names", path)
			}
			if _, ok := po.get(name); !ok {
				return "", fmt.Errorf("grammar: schema %s: required property %q is not among the properties", path, name)
			}
			required[name] = true
		}
	}
	extra := ""
	ap, hasAP := s.get("additionalProperties")
	switch {
	case hasAP && ap == false:
	case hasAP && ap != true:
		n, err := c.visit(ap, path+"/additionalProperties", hint+"-additional")
		if err != nil {
			return "", err
		}
		extra = c.add(hint+"-additional-kv", c.otherKey(hint+"-other-key", propNames(po))+` ":" space `+n)
	case !c.o.Strict:
		extra = c.add(hint+"-additional-kv", c.otherKey(hint+"-other-key", propNames(po))+` ":" space value`)
	}
	var kvs []string
	var req []bool
	if po != nil {
		for _, k := range po.keys {
			n, err := c.visit(po.vals[k], path+"/properties/"+k, hint+"-"+k)
			if err != nil {
				return "", err
			}
			kb, _ := json.Marshal(k)
			kvs = append(kvs, c.add(hint+"-"+k+"-kv", gbnfString(string(kb))+` space ":" space `+n))
			req = append(req, required[k])
		}
	}
	// after: what may follow once something was written, from i on.
	after := func(i int) string {
		var parts []string
		for j := i; j < len(kvs); j++ {
			if req[j] {
				parts = append(parts, `"," space `+kvs[j])
			} else {
				parts = append(parts, `("," space `+kvs[j]+`)?`)
			}
		}
		if extra != "" {
			parts = append(parts, `("," space `+extra+`)*`)
		}
		return strings.Join(parts, " ")
	}
	// first(i): the list from i on, nothing written yet.
	next := ""
	if extra != "" {
		next = "(" + extra + " " + after(len(kvs)) + ")?"
	}
	for i := len(kvs) - 1; i >= 0; i-- {
		body := strings.TrimSpace(kvs[i] + " " + after(i+1))
		if !req[i] {
			if next != "" {
				body = "(" + body + ") | " + next
			} else {
				body = "(" + body + ")?"
			}
		}
		next = c.add(fmt.Sprintf("%s-rest-%d", hint, i), body)
	}
	if next == "" {
		return c.add(hint, `"{" space "}" space`), nil
	}
	return c.add(hint, `"{" space `+next+` "}" space`), nil
}

// literal is the GBNF literal of a JSON value's compact encoding.
func literal(v any) string {
	return gbnfString(string(encodeCompact(v)))
}

func encodeCompact(v any) []byte {
	var b bytes.Buffer
	switch v := v.(type) {
	case *obj:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			b.Write(encodeCompact(v.vals[k]))
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(encodeCompact(x))
		}
		b.WriteByte(']')
	default:
		x, _ := json.Marshal(v)
		b.Write(x)
	}
	return b.Bytes()
}

// gbnfString quotes s as a GBNF string literal.
func gbnfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7F:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (c *conv) integer(s *obj, path, hint string) (string, error) {
	var lo, hi *int64
	for _, b := range []struct {
		key   string
		round func(float64) float64
		isMin bool
	}{
		{"minimum", math.Ceil, true},
		{"exclusiveMinimum", func(f float64) float64 { return math.Floor(f) + 1 }, true},
		{"maximum", math.Floor, false},
		{"exclusiveMaximum", func(f float64) float64 { return math.Ceil(f) - 1 }, false},
	} {
		v, ok := s.get(b.key)
		if !ok {
			continue
		}
		n, isNum := v.(json.Number)
		f, err := strconv.ParseFloat(string(n), 64)
		if !isNum || err != nil {
			return "", fmt.Errorf("grammar: schema %s: %s must be a number", path, b.key)
		}
		if f = b.round(f); f < -1e18 || f > 1e18 {
			return "", fmt.Errorf("grammar: schema %s: %s %s is beyond ±1e18", path, b.key, n)
		}
		x := int64(f)
		switch {
		case b.isMin && (lo == nil || x > *lo):
			lo = &x
		case !b.isMin && (hi == nil || x < *hi):
			hi = &x
		}
	}
	if lo == nil && hi == nil {
		return "integer", nil
	}
	if lo != nil && hi != nil && *lo > *hi {
		return "", fmt.Errorf("grammar: schema %s: no integer lies within the bounds", path)
	}
	return c.add(hint, intRange(lo, hi)+" space"), nil
}

// intRange is a GBNF expression for the integers in [lo, hi] (nil:
// unbounded) written as JSON writes them.
func intRange(lo, hi *int64) string {
	var alts []string
	// Negative values: "-" and a magnitude in [a, b].
	if lo == nil || *lo < 0 {
		a := uint64(1)
		if hi != nil && *hi < 0 {
			a = uint64(-*hi)
		}
		var b *uint64
		if lo != nil {
			m := uint64(-*lo)
			b = &m
		}
		if b == nil || a <= *b {
			alts = append(alts, `"-" `+uintRange(a, b))
		}
	}
	if hi == nil || *hi >= 0 {
		a := uint64(0)
		if lo != nil && *lo > 0 {
			a = uint64(*lo)
		}
		var b *uint64
		if hi != nil {
			m := uint64(*hi)
			b = &m
		}
		alts = append(alts, uintRange(a, b))
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

func digits(x uint64) int { return len(strconv.FormatUint(x, 10)) }

// uintRange matches the decimal numbers in [a, b] (b nil: unbounded, up to
// 19 digits), without leading zeros.
func uintRange(a uint64, b *uint64) string {
	var alts []string
	top := uint64(0)
	if b == nil {
		d := digits(a)
		top = pow10(d) - 1
		if d < 19 {
			alts = append(alts, fmt.Sprintf(`[1-9] [0-9]{%d,18}`, d))
		}
	} else {
		top = *b
	}
	for L := digits(a); L <= digits(top); L++ {
		lo, hi := a, top
		if L > 1 {
			lo = max(lo, pow10(L-1))
		}
		if L < 20 {
			hi = min(hi, pow10(L)-1)
		}
		if lo > hi {
			continue
		}
		alts = append(alts, sameLength(strconv.FormatUint(lo, 10), strconv.FormatUint(hi, 10)))
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

// sameLength matches the numbers between lo and hi, digit strings of one
// length.
func sameLength(lo, hi string) string {
	if lo == hi {
		return `"` + lo + `"`
	}
	if lo[0] == hi[0] {
		return `"` + lo[:1] + `" ` + sameLength(lo[1:], hi[1:])
	}
	rest := len(lo) - 1
	tail := func() string {
		if rest == 0 {
			return ""
		}
		return fmt.Sprintf(" [0-9]{%d}", rest)
	}
	allDigit := func(s string, d byte) bool { return strings.Count(s, string(d)) == len(s) }
	var alts []string
	from, to := lo[0], hi[0]
	if !allDigit(lo[1:], '0') {
		alts = append(alts, `"`+lo[:1]+`" `+sameLength(lo[1:], strings.Repeat("9", rest)))
		from++
	}
	last := ""
	if !allDigit(hi[1:], '9') {
		last = `"` + hi[:1] + `" ` + sameLength(strings.Repeat("0", rest), hi[1:])
		to--
	}
	if from <= to {
		alts = append(alts, fmt.Sprintf("[%c-%c]", from, to)+tail())
	}
	if last != "" {
		alts = append(alts, last)
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// otherKey is a rule for the object keys (JSON strings with their quotes)
// not among names: additional properties must not take a listed
// property's name, whose value its own schema governs. Such keys are
// written without escapes, so that no spelling of a listed name slips
// through.
func (c *conv) otherKey(hint string, names []string) string {
	if len(names) == 0 {
		return "string"
	}
	type node struct {
		kids  map[rune]*node
		order []rune
		end   bool
	}
	root := &node{kids: map[rune]*node{}}
	for _, n := range names {
		at := root
		for _, r := range n {
			k, ok := at.kids[r]
			if !ok {
				k = &node{kids: map[rune]*node{}}
				at.kids[r] = k
				at.order = append(at.order, r)
			}
			at = k
		}
		at.end = true
	}
	plain := c.add("plain-char", `[^"\\\x7F\x00-\x1F]`)
	var rule func(n *node, path string) string
	rule = func(n *node, path string) string {
		var alts []string
		if !n.end {
			alts = append(alts, `"\""`)
		}
		class := `[^"\\\x7F\x00-\x1F`
		for _, r := range n.order {
			class += fmt.Sprintf(`\U%08X`, r)
		}
		alts = append(alts, class+`] `+plain+`* "\""`)
		for i, r := range n.order {
			alts = append(alts, fmt.Sprintf(`[\U%08X] `, r)+rule(n.kids[r], fmt.Sprintf("%s-%d", path, i)))
		}
		return c.add(path, strings.Join(alts, " | "))
	}
	return c.add(hint, `"\"" `+rule(root, hint+"-k")+" space")
}

func propNames(po *obj) []string {
	if po == nil {
		return nil
	}
	return po.keys
}
