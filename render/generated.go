package render

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mathrand "math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/Masterminds/sprig/v3"
	"github.com/spf13/cast"
)

// A chart kind's templates may generate values as Helm charts do
// (randAlphaNum, uuidv4, genCA, now, ...). Helm makes a new one at every
// render, and a chart keeps it with lookup, or not at all. stencil makes
// each at the first render that calls it and reads it back at every later
// render: the resource's generated values are kept in a Secret of
// stencil's beside it (see package reconciler), so that a password, a
// certificate or a hash derived from them stays what it was across
// renders, restarts, replicas and upgrades.
//
// A value is known by where it is made, never by when: the call's place in
// its template (the template's name, the call's text and how many calls of
// the same text come before it there), the places of the includes that led
// to it since the manifest being rendered, its arguments, and how many
// times the same call was made before in this manifest (a range). An edit
// elsewhere in a template, or a value that turns on another call, leaves
// the others as they were; a manifest that includes another (a checksum of
// secret.yaml) sees the values that manifest has.

const (
	// fnGenerated is what a generating call becomes: its site and name
	// come first, then its arguments.
	fnGenerated = "stencilGenerated"
	// fnIncludeAt is include, with the place of the call first.
	fnIncludeAt = "stencilIncludeAt"
)

// Bounds on what a resource's templates generate: every value is made once
// and kept, in one Secret (at most 1 MiB).
const (
	maxGeneratedNew   = 32        // made by one render
	maxGeneratedKeys  = 8         // keys and certificates made by one render (each may take a second)
	maxGeneratedKept  = 256       // kept for one resource
	maxGeneratedBytes = 512 << 10 // their size, kept
	maxGeneratedLen   = 1 << 16   // of one random string
)

// generator makes one value of a generating function from its arguments,
// reading what randomness it needs from r.
type generator struct {
	out  reflect.Type
	make func(r io.Reader, args []any) (any, error)
	// seeded: the value is made of r alone, so a render with no store
	// (stencil render, test, lint) makes it from a source seeded by its
	// key, the same every time; else it gets a placeholder.
	seeded bool
	// key: a key or a certificate, whose making costs CPU time.
	key bool
}

var (
	stringType = reflect.TypeFor[string]()
	intType    = reflect.TypeFor[int]()
	timeType   = reflect.TypeFor[time.Time]()
)

// generators are the generating functions of the template library, by name.
var generators = func() map[string]generator {
	g := map[string]generator{
		"randAlphaNum": {out: stringType, make: randString(alphanumerics), seeded: true},
		"randAlpha":    {out: stringType, make: randString(alphanumerics[:52]), seeded: true},
		"randNumeric":  {out: stringType, make: randString(alphanumerics[52:]), seeded: true},
		"randAscii":    {out: stringType, make: randString(asciiPrintable()), seeded: true},
		"randBytes":    {out: stringType, make: randBytes, seeded: true},
		"randInt":      {out: intType, make: randInt, seeded: true},
		"uuidv4":       {out: stringType, make: uuidv4, seeded: true},
		"shuffle":      {out: stringType, make: shuffle, seeded: true},
		"now":          {out: timeType, make: func(io.Reader, []any) (any, error) { return time.Now().UTC(), nil }, seeded: false},
	}
	// The certificates, keys and salted hashes are sprig's own.
	library := sprig.TxtFuncMap()
	for _, name := range []string{
		"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
		"genSignedCert", "genSignedCertWithKey", "bcrypt", "htpasswd", "encryptAES",
	} {
		fn := reflect.ValueOf(library[name])
		g[name] = generator{out: fn.Type().Out(0), make: callLibrary(name, fn), key: strings.HasPrefix(name, "gen")}
	}
	return g
}()

func asciiPrintable() string {
	var b strings.Builder
	for c := byte(32); c < 127; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

// randString makes n characters of chars, each as likely.
func randString(chars string) func(io.Reader, []any) (any, error) {
	return func(r io.Reader, args []any) (any, error) {
		n, err := lengthArg(args)
		if err != nil {
			return nil, err
		}
		out := make([]byte, 0, n)
		buf := make([]byte, n)
		unbiased := 256 - 256%len(chars)
		for len(out) < n {
			if _, err := io.ReadFull(r, buf); err != nil {
				return nil, err
			}
			for _, b := range buf {
				if int(b) < unbiased && len(out) < n {
					out = append(out, chars[int(b)%len(chars)])
				}
			}
		}
		return string(out), nil
	}
}

func lengthArg(args []any) (int, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("takes one argument, a length; got %d", len(args))
	}
	n, err := cast.ToIntE(args[0])
	if err != nil {
		return 0, err
	}
	if n < 0 || n > maxGeneratedLen {
		return 0, fmt.Errorf("length %d: at most %d", n, maxGeneratedLen)
	}
	return n, nil
}

func randBytes(r io.Reader, args []any) (any, error) {
	n, err := lengthArg(args)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func randInt(r io.Reader, args []any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("takes two arguments, min and max; got %d", len(args))
	}
	lo, err := cast.ToIntE(args[0])
	if err != nil {
		return nil, err
	}
	hi, err := cast.ToIntE(args[1])
	if err != nil {
		return nil, err
	}
	span := uint64(hi) - uint64(lo) // wraps for no pair with hi above lo
	if hi <= lo {
		return nil, fmt.Errorf("max %d is not above min %d", hi, lo)
	}
	return int(uint64(lo) + uniform(r, span)), nil
}

// uniform is a number below n from r, each as likely.
func uniform(r io.Reader, n uint64) uint64 {
	return mathrand.New(readerSource{r}).Uint64N(n)
}

// readerSource is a math/rand source reading r (crypto/rand, or a seeded
// one); a failed read gives zeros, which only a broken source does.
type readerSource struct{ r io.Reader }

func (s readerSource) Uint64() uint64 {
	var b [8]byte
	_, _ = io.ReadFull(s.r, b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func uuidv4(r io.Reader, args []any) (any, error) {
	if len(args) != 0 {
		return nil, fmt.Errorf("takes no argument; got %d", len(args))
	}
	var u [16]byte
	if _, err := io.ReadFull(r, u[:]); err != nil {
		return nil, err
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

func shuffle(r io.Reader, args []any) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("takes one argument, a string; got %d", len(args))
	}
	s := []rune(cast.ToString(args[0]))
	if len(s) > maxGeneratedLen {
		return nil, fmt.Errorf("a string of %d characters: at most %d", len(s), maxGeneratedLen)
	}
	mathrand.New(readerSource{r}).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return string(s), nil
}

// callLibrary calls the library's function fn with args, converted to its
// parameters' types.
func callLibrary(name string, fn reflect.Value) func(io.Reader, []any) (any, error) {
	t := fn.Type()
	return func(_ io.Reader, args []any) (any, error) {
		if !t.IsVariadic() && len(args) != t.NumIn() {
			return nil, fmt.Errorf("takes %d arguments; got %d", t.NumIn(), len(args))
		}
		in := make([]reflect.Value, len(args))
		for i, a := range args {
			want := t.In(min(i, t.NumIn()-1))
			if t.IsVariadic() && i >= t.NumIn()-1 {
				want = want.Elem()
			}
			v, err := convertArg(a, want)
			if err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
			in[i] = v
		}
		out := fn.Call(in)
		if len(out) == 2 && !out[1].IsNil() {
			return nil, fmt.Errorf("%s: %w", name, out[1].Interface().(error))
		}
		return out[0].Interface(), nil
	}
}

// convertArg is a as a value of type want: itself, converted (a number),
// or, for a value a template made of another generated one (a CA), read
// through its JSON.
func convertArg(a any, want reflect.Type) (reflect.Value, error) {
	v := reflect.ValueOf(a)
	switch {
	case !v.IsValid():
		return reflect.Zero(want), nil
	case v.Type().AssignableTo(want):
		return v, nil
	case want.Kind() == reflect.Int:
		n, err := cast.ToIntE(a)
		return reflect.ValueOf(n), err
	case want.Kind() == reflect.String:
		s, err := cast.ToStringE(a)
		return reflect.ValueOf(s), err
	case want.Kind() == reflect.Slice && v.Kind() == reflect.Slice:
		return v, nil // []any, as sprig's list makes
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return reflect.Value{}, err
	}
	p := reflect.New(want)
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return reflect.Value{}, fmt.Errorf("not a %s", want)
	}
	return p.Elem(), nil
}

// Generated are the values one resource's templates generated: those its
// store held before a render, and those the render made or read. Give a
// render a new one (NewGenerated) every time.
type Generated struct {
	stored map[string][]byte
	used   map[string][]byte
	// made are the values the render made; keys, those of them that are
	// keys or certificates (the costly ones).
	made, keys int
}

// NewGenerated returns a resource's generated values as its store holds
// them (nil: it holds none yet).
func NewGenerated(stored map[string][]byte) *Generated {
	return &Generated{stored: stored, used: map[string][]byte{}}
}

// Made is how many values the render made that the store did not hold.
func (g *Generated) Made() int { return g.made }

// Keep is what the store should hold after a render: every value it held
// and every value the render made. A value no render uses any more stays
// (a template that did not run, a feature turned off and on again, a
// resource the rollout holds on its previous templates: each gets its old
// value back) until the kept values reach their limits, when those the
// render did not use go first. The bool is false when that is what the
// store holds already.
func (g *Generated) Keep() (map[string][]byte, bool) {
	keep := maps.Clone(g.used)
	size := 0
	for _, v := range keep {
		size += len(v)
	}
	for _, k := range slices.Sorted(maps.Keys(g.stored)) {
		v := g.stored[k]
		if _, ok := keep[k]; ok || len(keep) >= maxGeneratedKept || size+len(v) > maxGeneratedBytes {
			continue
		}
		keep[k] = v
		size += len(v)
	}
	return keep, !maps.EqualFunc(keep, g.stored, func(a, b []byte) bool { return string(a) == string(b) })
}

// generation is an execution's state of generated values: where the
// values are kept (nil: nowhere, a render offline), the includes since the
// manifest, and how many times each call was made in it.
type generation struct {
	g         *Generated
	chain     []string
	count     map[string]int
	manifests map[string]bool
	// secrets are the strings of the values generated or read back, which
	// an error never quotes.
	secrets []string
}

// quote is printed quoted for an error (its first 40 characters), or
// withheld when it holds a value the render generated or read back: a
// key's first line must not reach a status.
func (gen *generation) quote(printed string) string {
	if gen != nil {
		for _, v := range gen.secrets {
			if strings.Contains(printed, v) {
				return "withheld: it holds a generated value"
			}
		}
	}
	return fmt.Sprintf("%.40q", printed)
}

// remember adds the strings of v, a generated value, to those an error
// withholds.
func (gen *generation) remember(v any) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		gen.secrets = append(gen.secrets, rv.String())
	case reflect.Struct:
		for _, f := range rv.Fields() {
			if f.Kind() == reflect.String && f.Len() > 0 {
				gen.secrets = append(gen.secrets, f.String())
			}
		}
	}
}

// startManifest starts the render of one manifest.
func (gen *generation) startManifest() {
	if gen != nil {
		gen.chain = nil
		clear(gen.count)
	}
}

// enter runs an include of name called at site: the includes since the
// manifest are those before and this one; or, when name is a manifest
// itself, none, and its calls are counted afresh, as in its own render.
// The returned function leaves it.
func (gen *generation) enter(site, name string) func() {
	if gen == nil {
		return func() {}
	}
	chain, count := gen.chain, gen.count
	if gen.manifests[name] {
		gen.chain, gen.count = nil, map[string]int{}
	} else {
		gen.chain = append(slices.Clip(gen.chain), site)
	}
	return func() { gen.chain, gen.count = chain, count }
}

// generated is the value of the call of fn at site with args: the one kept,
// else a new one.
func (b *budget) generated(site, fn string, args []any) (any, error) {
	gen := b.gen
	g, ok := generators[fn]
	if !ok {
		return nil, fmt.Errorf("%s: not a generating function", fn)
	}
	if gen == nil {
		return nil, fmt.Errorf("%s: a value is generated only where a manifest renders, not in a status template or a rule", fn)
	}
	if b.inTpl > 0 {
		return nil, fmt.Errorf("%s: a template made of values (tpl) may not generate a value, nor read one, not even through a helper it includes", fn)
	}
	argText, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	call := strings.Join(gen.chain, "/") + "/" + site + "\x00" + fn + "\x00" + string(argText)
	nth := gen.count[call]
	gen.count[call]++
	sum := sha256.Sum256([]byte(call + "\x00" + strconv.Itoa(nth)))
	key := hex.EncodeToString(sum[:16])
	if gen.g == nil {
		return offlineValue(g, fn, key, args)
	}
	if raw, ok := gen.g.used[key]; ok {
		return decodeGenerated(g, raw)
	}
	if raw, ok := gen.g.stored[key]; ok {
		gen.g.used[key] = raw
		return decodeGenerated(g, raw)
	}
	return b.makeGenerated(g, fn, key, args)
}

// makeGenerated makes a new value of g for key; the time it takes (a
// certificate's key) is not counted against the render's time limit.
func (b *budget) makeGenerated(g generator, fn, key string, args []any) (any, error) {
	gen := b.gen.g
	if gen.made >= maxGeneratedNew {
		return nil, &LimitError{Limit: "values generated by one render", Max: strconv.Itoa(maxGeneratedNew)}
	}
	if len(gen.used) >= maxGeneratedKept {
		return nil, &LimitError{Limit: "generated values kept for a resource", Max: strconv.Itoa(maxGeneratedKept)}
	}
	if g.key {
		if gen.keys >= maxGeneratedKeys {
			return nil, &LimitError{Limit: "keys and certificates generated by one render", Max: strconv.Itoa(maxGeneratedKeys)}
		}
		gen.keys++
	}
	start := time.Now()
	v, err := g.make(rand.Reader, args)
	b.deadline = b.deadline.Add(time.Since(start))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	size := len(raw)
	for _, v := range gen.used {
		size += len(v)
	}
	if size > maxGeneratedBytes {
		return nil, &LimitError{Limit: "bytes of generated values kept for a resource", Max: strconv.Itoa(maxGeneratedBytes)}
	}
	gen.used[key] = raw
	gen.made++
	return v, nil
}

// decodeGenerated reads a kept value of g back.
func decodeGenerated(g generator, raw []byte) (any, error) {
	p := reflect.New(g.out)
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return nil, fmt.Errorf("a kept generated value does not read back as a %s: %w", g.out, err)
	}
	return p.Elem().Interface(), nil
}

// offlineValue is a generated value of a render with no store: made from a
// source seeded by its key, or a placeholder of its type (a certificate
// made offline would differ at every render).
func offlineValue(g generator, fn, key string, args []any) (any, error) {
	if g.seeded {
		var seed [32]byte
		copy(seed[:], key)
		v, err := g.make(mathrand.NewChaCha8(seed), args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		return v, nil
	}
	return placeholder(g.out, fn), nil
}

// OfflineTime is what now gives in a render with no store.
var OfflineTime = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// placeholder is a value of type t for a call of fn offline: every string
// in it says so.
func placeholder(t reflect.Type, fn string) any {
	text := "generated by " + fn + " in the cluster"
	v := reflect.New(t).Elem()
	switch {
	case t == timeType:
		v.Set(reflect.ValueOf(OfflineTime))
	case t.Kind() == reflect.String:
		v.SetString(text)
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if f := v.Field(i); f.CanSet() && f.Kind() == reflect.String {
				f.SetString(text)
			}
		}
	}
	return v.Interface()
}

// generatedFuncs are the functions of an execution whose budget b holds
// its generated values.
func generatedFuncs(b *budget) template.FuncMap {
	fm := timeFuncs()
	fm[fnGenerated] = func(site, fn string, args ...any) (any, error) {
		v, err := b.generated(site, fn, args)
		if err == nil {
			b.gen.remember(v)
		}
		return v, err
	}
	return fm
}

// timeFuncs are the library's functions of a time a chart kind may call:
// pure, given the time (now's, which is generated), and in UTC, as no
// operator's zone may change a render.
func timeFuncs() template.FuncMap {
	library := sprig.TxtFuncMap()
	inZone := library["dateInZone"].(func(string, any, string) string)
	fm := template.FuncMap{
		"date":     func(layout string, t any) string { return inZone(layout, t, "UTC") },
		"htmlDate": func(t any) string { return inZone("2006-01-02", t, "UTC") },
	}
	for _, name := range []string{"dateInZone", "date_in_zone", "htmlDateInZone", "dateModify", "date_modify", "mustDateModify", "must_date_modify", "unixEpoch"} {
		fm[name] = library[name]
	}
	return fm
}

// generatedStubs declare the functions addSites calls at parse time.
func generatedStubs() template.FuncMap {
	return template.FuncMap{
		fnGenerated: func(string, string, ...any) (any, error) { return nil, errors.New("not in a render") },
		fnIncludeAt: func(string, string, any) (string, error) { return "", errors.New("not in a render") },
	}
}

// addSites names, in the templates ts of a chart kind, every call of a
// generating function and every include by its place (see above), making
// them calls of fnGenerated and fnIncludeAt.
func addSites(ts ...*template.Template) {
	for _, t := range ts {
		if t.Tree == nil || t.Root == nil {
			continue
		}
		seen := map[string]int{}
		site := func(text string) string {
			i := seen[text]
			seen[text]++
			sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", t.Name(), text, i))
			return hex.EncodeToString(sum[:8])
		}
		walkNodes(t.Root, func(c *parse.CommandNode) { addSite(c, site) }, func(string) {})
	}
}

// addSite rewrites the command c when it calls a generating function or
// include, or takes one's value as an argument.
func addSite(c *parse.CommandNode, site func(text string) string) {
	text := c.String()
	for i, a := range c.Args[1:] {
		if id, ok := a.(*parse.IdentifierNode); ok && isGenerator(id.Ident) {
			call := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: id.Pos,
				Args: []parse.Node{identifier(fnGenerated, id.Pos), stringNode(site(id.Ident), id.Pos), stringNode(id.Ident, id.Pos)}}
			c.Args[i+1] = &parse.PipeNode{NodeType: parse.NodePipe, Pos: id.Pos, Cmds: []*parse.CommandNode{call}}
		}
	}
	id, ok := c.Args[0].(*parse.IdentifierNode)
	switch {
	case !ok:
	case id.Ident == "include":
		c.Args = slices.Insert(c.Args, 1, parse.Node(stringNode(site(text), id.Pos)))
		c.Args[0] = identifier(fnIncludeAt, id.Pos)
	case isGenerator(id.Ident):
		c.Args = slices.Insert(c.Args, 1, parse.Node(stringNode(site(text), id.Pos)), parse.Node(stringNode(id.Ident, id.Pos)))
		c.Args[0] = identifier(fnGenerated, id.Pos)
	}
}

func isGenerator(name string) bool {
	_, ok := generators[name]
	return ok
}

func identifier(name string, pos parse.Pos) *parse.IdentifierNode {
	return parse.NewIdentifier(name).SetPos(pos)
}

func stringNode(s string, pos parse.Pos) *parse.StringNode {
	return &parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(s), Text: s}
}

// sites are the calls addSites made, as an error quotes them, and what
// they were.
var sites = strings.NewReplacer(
	"error calling "+fnIncludeAt+":", "error calling include:",
	"error calling "+fnGenerated+": ", "error calling ",
)

var sited = regexp.MustCompile(fnIncludeAt + ` "[0-9a-f]{16}" |` + fnGenerated + ` "[0-9a-f]{16}" "(\w+)"`)

// withoutSites is err with the calls addSites made quoted as they were
// written: include, randAlphaNum.
func withoutSites(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, fnIncludeAt) && !strings.Contains(msg, fnGenerated) {
		return err
	}
	msg = sited.ReplaceAllStringFunc(sites.Replace(msg), func(m string) string {
		if strings.HasPrefix(m, fnIncludeAt) {
			return "include "
		}
		return sited.FindStringSubmatch(m)[1]
	})
	return &sitedError{err: err, msg: msg}
}

// sitedError is an error of a template whose message quotes its calls as
// written.
type sitedError struct {
	err error
	msg string
}

func (e *sitedError) Error() string { return e.msg }
func (e *sitedError) Unwrap() error { return e.err }

// generates reports whether a template of t calls a generating function.
func generates(t *template.Template) bool { return calls(t, fnGenerated) }

// calls reports whether a template of t calls the function fn.
func calls(t *template.Template, fn string) bool {
	for _, tt := range t.Templates() {
		if tt.Tree == nil {
			continue
		}
		found := false
		walkNodes(tt.Root, func(c *parse.CommandNode) {
			for _, a := range c.Args {
				if id, ok := a.(*parse.IdentifierNode); ok && id.Ident == fn {
					found = true
				}
			}
		}, func(string) {})
		if found {
			return true
		}
	}
	return false
}
