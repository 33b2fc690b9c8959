package jinja

// This file is glint's addition to the vendored interpreter (see
// UPSTREAM.md): the limits a render runs under. Chat templates come from
// model files, so a template is untrusted code; every hook in eval.go,
// builtins.go, parse.go and value.go marked "glint:" calls into here.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Limits bound one render. A zero field takes its default (DefaultLimits).
type Limits struct {
	// Steps counts template nodes and expressions evaluated, loop
	// iterations, and list items a filter walks.
	Steps int64
	// Bytes counts the bytes the render writes (its output and the output
	// of macros and blocks) and the bytes of every string and list it
	// builds; it also caps any one string or list value.
	Bytes int64
	// Depth caps nested macro and caller() calls.
	Depth int
	// Time caps the wall time of one render.
	Time time.Duration
}

// DefaultLimits leaves ample room for real chat templates. Measured on the
// templates staged in shared/models/chat-templates, with their test
// conversation and with a 201-message conversation (~120 KB of output) and
// a tool definition: at most ~15k steps and ~500 KB written and built, no
// nested macro calls. The defaults are over 500× those, yet a hostile
// template stops within seconds and a few hundred MiB.
var DefaultLimits = Limits{
	Steps: 20_000_000,
	Bytes: 256 << 20,
	Depth: 200,
	Time:  10 * time.Second,
}

// maxNesting caps the nesting of the template source (expressions and
// blocks, which the parser and evaluator follow by recursion) and of values
// that repr, tojson and == walk (a list may contain itself). Go cannot
// recover from a stack overflow, so this must hold before the stack runs
// out; real templates nest under 10 deep.
const maxNesting = 256

// maxText caps the text of one repr (a list or dict printed) or tojson,
// which builtins without access to the render's budget produce; the
// budget then charges what they made.
const maxText = 16 << 20

// maxCompare caps the items one == or "in" compares, since values sharing
// sub-lists can make a comparison exponential in their size.
const maxCompare = 1 << 22

// LimitError is the error of a render stopped by one of its limits.
type LimitError struct {
	// Limit names the limit: "steps", "bytes", "depth", "time", "nesting",
	// "text" or "compare".
	Limit string
	// Max is the limit's value.
	Max int64
}

func (e *LimitError) Error() string {
	if e.Limit == "time" {
		return fmt.Sprintf("jinja: render exceeded its time limit of %v", time.Duration(e.Max))
	}
	return fmt.Sprintf("jinja: render exceeded its %s limit of %d", e.Limit, e.Max)
}

// budget is one render's account against its Limits.
type budget struct {
	ctx      context.Context
	lim      Limits
	steps    int64
	bytes    int64
	depth    int
	nest     int
	deadline time.Time
}

func newBudget(ctx context.Context, lim Limits) *budget {
	if lim.Steps <= 0 {
		lim.Steps = DefaultLimits.Steps
	}
	if lim.Bytes <= 0 {
		lim.Bytes = DefaultLimits.Bytes
	}
	if lim.Depth <= 0 {
		lim.Depth = DefaultLimits.Depth
	}
	if lim.Time <= 0 {
		lim.Time = DefaultLimits.Time
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return &budget{ctx: ctx, lim: lim, deadline: time.Now().Add(lim.Time)}
}

// checkEvery is how many steps pass between looks at the clock and the
// context: a step costs tens of nanoseconds, so this reacts within a
// millisecond or so.
const checkEvery = 4096

// charge counts n steps.
func (b *budget) charge(n int64) error {
	before := b.steps
	b.steps += n
	if b.steps > b.lim.Steps {
		return &LimitError{Limit: "steps", Max: b.lim.Steps}
	}
	if before/checkEvery != b.steps/checkEvery {
		if err := b.ctx.Err(); err != nil {
			return fmt.Errorf("jinja: render stopped: %w", err)
		}
		if time.Now().After(b.deadline) {
			return &LimitError{Limit: "time", Max: int64(b.lim.Time)}
		}
	}
	return nil
}

func (b *budget) step() error { return b.charge(1) }

// spend counts n bytes written or built.
func (b *budget) spend(n int64) error {
	b.bytes += n
	if b.bytes > b.lim.Bytes || n > b.lim.Bytes {
		return &LimitError{Limit: "bytes", Max: b.lim.Bytes}
	}
	return nil
}

// valueItemBytes is what a list item costs (a Value is a kind and an
// interface).
const valueItemBytes = 24

// made charges a value an operation built: a string's bytes, a list's
// items.
func (b *budget) made(v Value) error {
	switch v.kind {
	case KindString:
		return b.spend(int64(len(v.AsString())))
	case KindList:
		n := int64(v.AsList().Len())
		if err := b.charge(n); err != nil {
			return err
		}
		return b.spend(n * valueItemBytes)
	}
	return nil
}

// enter and leave bracket a macro or caller() call.
func (b *budget) enter() error {
	b.depth++
	if b.depth > b.lim.Depth {
		b.depth--
		return &LimitError{Limit: "depth", Max: int64(b.lim.Depth)}
	}
	return nil
}

func (b *budget) leave() { b.depth-- }

// mayHave says whether n more bytes fit, before an operation allocates them.
func (b *budget) mayHave(n int64) error {
	if n < 0 || n > b.lim.Bytes-b.bytes {
		return &LimitError{Limit: "bytes", Max: b.lim.Bytes}
	}
	return nil
}

// repeat checks s * n before strings.Repeat allocates it.
func (b *budget) repeat(s Value, n Value) error {
	if !s.IsString() || !n.IsInt() || n.AsInt() <= 0 {
		return nil
	}
	l := int64(len(s.AsString()))
	if l > 0 && n.AsInt() > (b.lim.Bytes-b.bytes)/l {
		return &LimitError{Limit: "bytes", Max: b.lim.Bytes}
	}
	return nil
}

// replaced checks the size of strings.Replace(s, old, new, count) before it
// allocates.
func (b *budget) replaced(s, old, new string, count int) error {
	if len(new) <= len(old) {
		return nil
	}
	n := strings.Count(s, old)
	if count >= 0 && count < n {
		n = count
	}
	return b.mayHave(int64(len(s)) + int64(n)*int64(len(new)-len(old)))
}

// printable walks v as repr or tojson would, charging a step per item and
// stopping once its text would pass the bytes left: the builtins that print
// or serialise a value call this first.
func (b *budget) printable(v Value) error {
	left := b.lim.Bytes - b.bytes
	var size int64
	var walk func(v Value, depth int) error
	walk = func(v Value, depth int) error {
		if depth > maxNesting {
			return &LimitError{Limit: "nesting", Max: maxNesting}
		}
		if err := b.step(); err != nil {
			return err
		}
		switch v.kind {
		case KindString:
			size += int64(len(v.AsString())) + 2
		case KindList:
			size += 2
			for _, it := range v.AsList().Items {
				size += 2
				if err := walk(it, depth+1); err != nil {
					return err
				}
			}
		case KindDict:
			d := v.AsDict()
			size += 2
			for _, k := range d.Keys {
				size += int64(len(k)) + 6
				if err := walk(d.Data[k], depth+1); err != nil {
					return err
				}
			}
		default:
			size += 24
		}
		if size > left {
			return &LimitError{Limit: "bytes", Max: b.lim.Bytes}
		}
		return nil
	}
	return walk(v, 0)
}

// print is printValue under the budget: a list or dict is walked first.
func (e *evaluator) print(v Value) (string, error) {
	if v.IsList() || v.IsDict() {
		if err := e.b.printable(v); err != nil {
			return "", err
		}
	}
	return printValue(v), nil
}

// write adds s to the evaluator's output.
func (e *evaluator) write(s string) error {
	if err := e.b.spend(int64(len(s))); err != nil {
		return err
	}
	e.output.WriteString(s)
	return nil
}

// printingFilters print or serialise their arguments (or compare their
// items by printing them), so their list and dict arguments are walked by
// printable first.
var printingFilters = map[string]bool{
	"tojson": true, "join": true, "string": true, "unique": true, "trim": true,
	"lower": true, "upper": true, "title": true, "capitalize": true,
	"replace": true, "indent": true, "wordcount": true, "escape": true, "e": true,
	"safe": true, "raise_exception": true,
}

// builtinsFor is the builtins scope of one render: every global and filter
// of the shared scope wrapped to charge the budget, range made to check its
// length before it builds the list, and the filters whose output can grow
// far beyond their input checked before they allocate.
func builtinsFor(b *budget) *scope {
	s := newScope(cachedBuiltins)
	for name, v := range cachedBuiltins.vars {
		if !v.IsCallable() {
			continue
		}
		fn := v.AsCallable().Fn
		short := strings.TrimPrefix(name, "__filter_")
		printing := printingFilters[short]
		var pre func(args []Value, kwargs map[string]Value) error
		switch name {
		case "range":
			pre = b.rangeLen
		case "__filter_indent":
			pre = b.indentLen
		case "__filter_replace":
			pre = func(args []Value, _ map[string]Value) error {
				if len(args) < 3 {
					return nil
				}
				count := -1
				if len(args) > 3 {
					count = int(toInt64(args[3]))
				}
				return b.replaced(printValue(args[0]), printValue(args[1]), printValue(args[2]), count)
			}
		case "__filter_tojson":
			pre = b.tojsonIndent
		case "__filter_join":
			pre = func(args []Value, kwargs map[string]Value) error {
				if len(args) == 0 || !args[0].IsList() {
					return nil
				}
				sep := int64(0)
				if len(args) > 1 {
					sep = int64(len(printValue(args[1])))
				}
				if s, ok := kwargs["d"]; ok {
					sep = int64(len(printValue(s)))
				}
				return b.mayHave(sep * int64(args[0].AsList().Len()))
			}
		}
		wrapped := func(args []Value, kwargs map[string]Value) (Value, error) {
			for _, a := range args {
				if printing && (a.IsList() || a.IsDict()) {
					if err := b.printable(a); err != nil {
						return Undefined(), err
					}
				} else {
					if err := b.scan(a); err != nil {
						return Undefined(), err
					}
				}
			}
			if pre != nil {
				if err := pre(args, kwargs); err != nil {
					return Undefined(), err
				}
			}
			return fn(args, kwargs)
		}
		s.set(name, NewCallable(v.AsCallable().Name, wrapped))
	}
	return s
}

// rangeLen fails a range longer than the steps left before it is built:
// iterating it would run out of steps anyway.
func (b *budget) rangeLen(args []Value, _ map[string]Value) error {
	var start, stop, step int64 = 0, 0, 1
	switch len(args) {
	case 1:
		stop = toInt64(args[0])
	case 2:
		start, stop = toInt64(args[0]), toInt64(args[1])
	case 3:
		start, stop, step = toInt64(args[0]), toInt64(args[1]), toInt64(args[2])
	default:
		return nil
	}
	var n float64 // float: stop-start may overflow int64
	switch {
	case step > 0 && stop > start:
		n = (float64(stop) - float64(start)) / float64(step)
	case step < 0 && stop < start:
		n = (float64(start) - float64(stop)) / -float64(step)
	}
	if n > float64(b.lim.Steps-b.steps) {
		return &LimitError{Limit: "steps", Max: b.lim.Steps}
	}
	if err := b.charge(int64(n)); err != nil {
		return err
	}
	return b.mayHave(int64(n) * valueItemBytes)
}

// indentLen checks indent's padding (width × lines) before it is built.
func (b *budget) indentLen(args []Value, kwargs map[string]Value) error {
	if len(args) == 0 {
		return nil
	}
	width := int64(4)
	if len(args) > 1 {
		width = toInt64(args[1])
	}
	if w, ok := kwargs["width"]; ok {
		width = toInt64(w)
	}
	if width <= 0 {
		return nil
	}
	s := printValue(args[0])
	lines := int64(strings.Count(s, "\n") + 1)
	if width > (b.lim.Bytes-b.bytes)/lines {
		return &LimitError{Limit: "bytes", Max: b.lim.Bytes}
	}
	return b.mayHave(int64(len(s)) + width*lines)
}

// tojsonIndent checks tojson(indent=N): every line of the output carries up
// to N × nesting spaces, so the compact text's size times that must fit.
func (b *budget) tojsonIndent(args []Value, kwargs map[string]Value) error {
	ind, ok := kwargs["indent"]
	if !ok || ind.IsNone() || ind.IsUndefined() || len(args) == 0 {
		return nil
	}
	width := toInt64(ind)
	if width <= 0 {
		return nil
	}
	var lines int64
	var walk func(v Value, depth int64) error
	walk = func(v Value, depth int64) error {
		if depth > maxNesting {
			return &LimitError{Limit: "nesting", Max: maxNesting}
		}
		if err := b.step(); err != nil {
			return err
		}
		var kids []Value
		if v.IsList() {
			kids = v.AsList().Items
		} else if v.IsDict() {
			for _, k := range v.AsDict().Keys {
				kids = append(kids, v.AsDict().Data[k])
			}
		}
		for _, k := range kids {
			if depth+1 > 0 && width > (b.lim.Bytes-b.bytes)/(depth+1) {
				return &LimitError{Limit: "bytes", Max: b.lim.Bytes}
			}
			lines += width * (depth + 1)
			if lines > b.lim.Bytes-b.bytes {
				return &LimitError{Limit: "bytes", Max: b.lim.Bytes}
			}
			if err := walk(k, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(args[0], 0)
}

// nested panics with a nesting LimitError once a value walk goes too deep;
// render recovers it. It serves the value methods (repr, ==) that have no
// error result.
func nested(depth int) {
	if depth > maxNesting {
		panic(&LimitError{Limit: "nesting", Max: maxNesting})
	}
}

// textFull panics once a repr or tojson text passes maxText.
func textFull(n int) {
	if n > maxText {
		panic(&LimitError{Limit: "text", Max: maxText})
	}
}

// writeValue prints v into the output.
func (e *evaluator) writeValue(v Value) error {
	s, err := e.print(v)
	if err != nil {
		return err
	}
	return e.write(s)
}

// binary checks an operator's operands before it builds its result (s * n
// repeats s; + and ~ print a list or dict operand) and charges the result.
func (e *evaluator) binary(op string, left, right Value, eval func() Value) (Value, error) {
	switch op {
	case "*":
		if err := e.b.repeat(left, right); err != nil {
			return Undefined(), err
		}
	case "+", "~":
		for _, v := range []Value{left, right} {
			if (op == "~" || left.IsString() || right.IsString()) && (v.IsList() || v.IsDict()) {
				if err := e.b.printable(v); err != nil {
					return Undefined(), err
				}
			}
		}
	}
	v := eval()
	return v, e.b.made(v)
}

// scanCost is the bytes of a string scan that cost one step.
const scanCost = 64

// scan charges an operation that reads all of a string (or a list's items).
func (b *budget) scan(v Value) error {
	switch v.kind {
	case KindString:
		return b.charge(int64(len(v.AsString())) / scanCost)
	case KindList:
		return b.charge(int64(v.AsList().Len()))
	}
	return nil
}

// deeper and shallower bracket the parser's recursive steps.
func (p *exprParser) deeper() error {
	p.depth++
	if p.depth > maxNesting {
		return fmt.Errorf("expression nested more than %d deep", maxNesting)
	}
	return nil
}

func (p *exprParser) shallower() { p.depth-- }

// maxEvalNesting caps the evaluator's recursion (expressions within
// expressions, blocks within blocks, macro calls): a left-associative chain
// such as 1+1+…+1 parses without recursion but evaluates with it.
const maxEvalNesting = 20000

// in and out bracket one level of the evaluator's recursion.
func (b *budget) in() error {
	b.nest++
	if b.nest > maxEvalNesting {
		b.nest--
		return &LimitError{Limit: "nesting", Max: maxEvalNesting}
	}
	return nil
}

func (b *budget) out() { b.nest-- }

// RaiseError is the error of a template that called raise_exception: the
// template's verdict on its input, not a fault of the template.
type RaiseError struct{ Msg string }

func (e *RaiseError) Error() string { return e.Msg }
