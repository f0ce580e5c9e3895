package hostsfile

import (
	"errors"
	"fmt"
	"strings"
	"text/template/parse"
)

// nameTemplate is a host name template in Go template syntax, parsed by
// text/template/parse and evaluated over a Member without reflection.
//
// text/template is not used: its executor looks methods up by name at run
// time (reflect.Value.MethodByName), so the linker must keep every exported
// method of every type in the binary, about 4 MB of peer-finder's (see
// bench/README.md, "Footprint"). A host name needs much less: text, the
// Member fields (.Name .FQDN .Pod .Role .Index .Ordinal .Node .Zone .Labels,
// .Labels.key), parenthesised pipelines and "|", if/else if/else, and the
// functions index, print, printf, println, len, eq, ne, not, and, or. Any
// other construct (range, with, variables, templates, other functions) and
// any unknown field is refused when the template is parsed.
type nameTemplate struct {
	tree *parse.Tree
}

// funcs are the functions a name template may call, implemented by call
// (parse only checks that a name has a non-nil value).
var funcs = map[string]any{
	"index": true, "print": true, "printf": true, "println": true, "len": true,
	"eq": true, "ne": true, "not": true, "and": true, "or": true,
}

// parseTemplate parses text and checks it uses only what execute knows.
func parseTemplate(name, text string) (*nameTemplate, error) {
	trees, err := parse.Parse(name, text, "", "", funcs)
	if err != nil {
		return nil, err
	}
	if len(trees) != 1 {
		return nil, errors.New("define and block are not supported in a host name template")
	}
	t := trees[name]
	if t == nil || t.Root == nil {
		return nil, errors.New("empty template")
	}
	if err := check(t.Root); err != nil {
		return nil, err
	}
	return &nameTemplate{tree: t}, nil
}

// memberFields are Member's fields by name.
var memberFields = map[string]bool{"Name": true, "FQDN": true, "Pod": true, "Role": true, "Index": true, "Ordinal": true, "Node": true, "Zone": true, "Labels": true}

// check refuses the nodes execute does not evaluate.
func check(n parse.Node) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := check(c); err != nil {
				return err
			}
		}
		return nil
	case *parse.TextNode, *parse.CommentNode:
		return nil
	case *parse.ActionNode:
		return check(n.Pipe)
	case *parse.IfNode:
		if err := check(n.Pipe); err != nil {
			return err
		}
		if err := check(n.List); err != nil {
			return err
		}
		return check(n.ElseList)
	case *parse.PipeNode:
		if len(n.Decl) > 0 {
			return fmt.Errorf("%s: variables are not supported in a host name template", n)
		}
		for _, c := range n.Cmds {
			for _, a := range c.Args {
				if err := check(a); err != nil {
					return err
				}
			}
		}
		return nil
	case *parse.FieldNode:
		if !memberFields[n.Ident[0]] || len(n.Ident) > 2 || (len(n.Ident) == 2 && n.Ident[0] != "Labels") {
			return fmt.Errorf("%s: no such field (a host name template knows .Name .FQDN .Pod .Role .Index .Ordinal .Node .Zone .Labels and .Labels.key)", n)
		}
		return nil
	case *parse.NumberNode:
		if !n.IsInt || strings.TrimLeft(strings.TrimPrefix(n.Text, "-"), "0123456789") != "" {
			return fmt.Errorf("%s: only decimal integers are supported in a host name template", n)
		}
		return nil
	case *parse.IdentifierNode, *parse.DotNode, *parse.StringNode, *parse.BoolNode:
		return nil
	}
	return fmt.Errorf("%s: not supported in a host name template", n)
}

// execute evaluates t over m.
func (t *nameTemplate) execute(m Member) (string, error) {
	var b strings.Builder
	if err := walk(&b, t.tree.Root, m); err != nil {
		return "", err
	}
	return b.String(), nil
}

func walk(b *strings.Builder, n parse.Node, m Member) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := walk(b, c, m); err != nil {
				return err
			}
		}
	case *parse.TextNode:
		b.Write(n.Text)
	case *parse.ActionNode:
		v, err := pipe(n.Pipe, m)
		if err != nil {
			return err
		}
		fmt.Fprint(b, v)
	case *parse.IfNode:
		v, err := pipe(n.Pipe, m)
		if err != nil {
			return err
		}
		if truth(v) {
			return walk(b, n.List, m)
		}
		if n.ElseList != nil {
			return walk(b, n.ElseList, m)
		}
	}
	return nil
}

// pipe evaluates a pipeline: each command's result is the last argument of
// the next.
func pipe(p *parse.PipeNode, m Member) (any, error) {
	var v any
	for i, c := range p.Cmds {
		args := make([]any, 0, len(c.Args))
		fn := ""
		for j, a := range c.Args {
			if id, ok := a.(*parse.IdentifierNode); ok && j == 0 {
				fn = id.Ident
				continue
			}
			x, err := arg(a, m)
			if err != nil {
				return nil, err
			}
			args = append(args, x)
		}
		if i > 0 {
			args = append(args, v)
		}
		var err error
		switch {
		case fn != "":
			v, err = call(fn, args)
		case len(args) == 1:
			v = args[0]
		default:
			err = fmt.Errorf("%s: can't give an argument to a non-function", c)
		}
		if err != nil {
			return nil, err
		}
	}
	return v, nil
}

func arg(n parse.Node, m Member) (any, error) {
	switch n := n.(type) {
	case *parse.FieldNode:
		return field(n.Ident, m), nil
	case *parse.DotNode:
		return m, nil
	case *parse.StringNode:
		return n.Text, nil
	case *parse.BoolNode:
		return n.True, nil
	case *parse.NumberNode:
		return int(n.Int64), nil
	case *parse.PipeNode:
		return pipe(n, m)
	case *parse.IdentifierNode:
		return call(n.Ident, nil)
	}
	return nil, fmt.Errorf("%s: not supported in a host name template", n)
}

// field returns the value of a field chain checked by check; a missing
// label is "" (text/template's missingkey=zero).
func field(ident []string, m Member) any {
	switch ident[0] {
	case "Name":
		return m.Name
	case "FQDN":
		return m.FQDN
	case "Pod":
		return m.Pod
	case "Role":
		return m.Role
	case "Index":
		return m.Index
	case "Ordinal":
		return m.Ordinal
	case "Node":
		return m.Node
	case "Zone":
		return m.Zone
	}
	if len(ident) == 2 {
		return m.Labels[ident[1]]
	}
	return m.Labels
}

func call(fn string, args []any) (any, error) {
	switch fn {
	case "print":
		return fmt.Sprint(args...), nil
	case "println":
		return fmt.Sprintln(args...), nil
	case "printf":
		if len(args) == 0 {
			return nil, errors.New("printf: missing format")
		}
		format, ok := args[0].(string)
		if !ok {
			return nil, errors.New("printf: format is not a string")
		}
		return fmt.Sprintf(format, args[1:]...), nil
	case "not":
		if len(args) != 1 {
			return nil, errors.New("not: want 1 argument")
		}
		return !truth(args[0]), nil
	case "and", "or":
		if len(args) == 0 {
			return nil, fmt.Errorf("%s: want arguments", fn)
		}
		for _, a := range args[:len(args)-1] {
			if truth(a) != (fn == "and") {
				return a, nil
			}
		}
		return args[len(args)-1], nil
	case "len":
		if len(args) != 1 {
			return nil, errors.New("len: want 1 argument")
		}
		switch a := args[0].(type) {
		case string:
			return len(a), nil
		case map[string]string:
			return len(a), nil
		}
		return nil, fmt.Errorf("len of %T", args[0])
	case "index":
		if len(args) != 2 {
			return nil, errors.New("index: want a map and one key")
		}
		labels, ok1 := args[0].(map[string]string)
		key, ok2 := args[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("index of %T by %T: only .Labels by a string", args[0], args[1])
		}
		return labels[key], nil
	case "eq", "ne":
		if len(args) < 2 {
			return nil, fmt.Errorf("%s: want 2 arguments", fn)
		}
		eq := false
		for _, b := range args[1:] {
			same, err := equal(args[0], b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fn, err)
			}
			eq = eq || same
		}
		if fn == "ne" {
			if len(args) != 2 {
				return nil, errors.New("ne: want 2 arguments")
			}
			return !eq, nil
		}
		return eq, nil
	}
	return nil, fmt.Errorf("%s: not a function", fn)
}

func equal(a, b any) (bool, error) {
	switch a := a.(type) {
	case string:
		if b, ok := b.(string); ok {
			return a == b, nil
		}
	case int:
		if b, ok := b.(int); ok {
			return a == b, nil
		}
	case bool:
		if b, ok := b.(bool); ok {
			return a == b, nil
		}
	}
	return false, fmt.Errorf("incompatible types for comparison: %T and %T", a, b)
}

// truth is text/template's truth of a value: non-empty, non-zero, true.
func truth(v any) bool {
	switch v := v.(type) {
	case string:
		return v != ""
	case int:
		return v != 0
	case bool:
		return v
	case map[string]string:
		return len(v) > 0
	case nil:
		return false
	}
	return true
}
