package jinja

import (
	"context"
	"fmt"
	"strings"
)

// Template is a compiled Jinja template ready for rendering.
type Template struct {
	nodes []node
	src   string
}

// Compile parses a Jinja template source string and returns a compiled
// template that can be rendered multiple times with different data.
func Compile(source string) (*Template, error) {
	segs, err := scan(source)
	if err != nil {
		return nil, fmt.Errorf("jinja scan: %w", err)
	}

	nodes, err := parseTemplate(segs)
	if err != nil {
		return nil, fmt.Errorf("jinja parse: %w", err)
	}

	return &Template{nodes: nodes, src: source}, nil
}

// Render executes the template with the provided data and returns the
// rendered string. Each call creates an isolated scope so templates are
// safe to render concurrently after compilation.
func (t *Template) Render(data map[string]any) (string, error) {
	// Convert Go data to Value types.
	vals := make(map[string]Value, len(data))
	for k, v := range data {
		vals[k] = FromGoValue(v)
	}

	return t.RenderValues(vals)
}

// RenderValues is like Render but accepts pre-converted Value data.
func (t *Template) RenderValues(data map[string]Value) (string, error) {
	return t.RenderLimited(context.Background(), Limits{}, data)
}

// RenderLimited is RenderValues under limits (glint: see budget.go): it
// stops with a *LimitError when the template exceeds one, with ctx's error
// when ctx ends, and turns a panic inside the interpreter into an error.
func (t *Template) RenderLimited(ctx context.Context, lim Limits, data map[string]Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			if le, ok := r.(*LimitError); ok {
				err = le
			} else {
				err = fmt.Errorf("jinja: internal error: %v", r)
			}
			out = ""
		}
	}()
	return render(t.nodes, data, newBudget(ctx, lim))
}

// =============================================================================

// render executes the AST with the given data and returns the result.
func render(nodes []node, data map[string]Value, b *budget) (string, error) {
	e := evaluator{
		output: strings.Builder{},
		b:      b, // glint: limits
	}

	// Use the cached builtins scope directly. The scope is initialized
	// once at package init and is only read after that (lookupFilter,
	// chained get() through parent links, passed to nested evaluators).
	// No code path writes to e.builtins, so sharing the cached scope
	// across renders is safe and avoids cloning ~20 entries per render.
	e.builtins = builtinsFor(b) // glint: the shared builtins, wrapped to charge b

	// Create user data scope on top of builtins.
	e.scope = newScope(e.builtins)
	for k, v := range data {
		e.scope.set(k, v)
	}

	if err := e.execNodes(nodes); err != nil {
		return "", err
	}

	return e.output.String(), nil
}
