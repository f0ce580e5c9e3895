package main

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
)

// A Mutant is one small change to one file: the bytes [Start, End) of the
// file's source are replaced by Repl.
type Mutant struct {
	File       string // path as given to mutantsOf
	Line, Col  int
	Start, End int
	Repl       string
	Op         string // the operator's name, e.g. "negate-comparison"
	Desc       string // e.g. `"<" -> ">="`
}

// Apply returns src with m applied.
func (m Mutant) Apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(m.Repl))
	out = append(out, src[:m.Start]...)
	out = append(out, m.Repl...)
	return append(out, src[m.End:]...)
}

func (m Mutant) String() string {
	return fmt.Sprintf("%s:%d:%d %s %s", m.File, m.Line, m.Col, m.Op, m.Desc)
}

// The operators. Each is a plausible one-token bug.
var (
	negate = map[token.Token]token.Token{
		token.EQL: token.NEQ, token.NEQ: token.EQL,
		token.LSS: token.GEQ, token.GEQ: token.LSS,
		token.GTR: token.LEQ, token.LEQ: token.GTR,
	}
	boundary = map[token.Token]token.Token{
		token.LSS: token.LEQ, token.LEQ: token.LSS,
		token.GTR: token.GEQ, token.GEQ: token.GTR,
	}
	logical    = map[token.Token]token.Token{token.LAND: token.LOR, token.LOR: token.LAND}
	arithmetic = map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL}
)

// logMethods are the calls whose arguments and statements are not mutated:
// dropping a log record or changing what it says is not a bug the tests
// of a rule should catch.
var logMethods = map[string]bool{
	"Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "LogAttrs": true,
	"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true,
}

func isLogCall(n ast.Node) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && logMethods[sel.Sel.Name]
}

// mutantsOf returns the mutants of one Go source file, in source order:
// comparison operators negated and moved across their boundary, && and ||
// swapped, + - * / swapped, ! dropped, true and false swapped, integer
// constants changed (0 to 1, 1 to 0, n to n+1), and statements dropped
// (calls, assignments, ++/--, sends, defers, break/continue). Code inside
// log calls is left alone.
func mutantsOf(path string, src []byte) ([]Mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var ms []Mutant
	add := func(pos, end token.Pos, repl, op, desc string) {
		p := fset.Position(pos)
		ms = append(ms, Mutant{File: path, Line: p.Line, Col: p.Column, Start: p.Offset, End: fset.Position(end).Offset, Repl: repl, Op: op, Desc: desc})
	}
	dropList := func(list []ast.Stmt) {
		for _, s := range list {
			switch s := s.(type) {
			case *ast.ExprStmt:
				if isLogCall(s.X) {
					continue
				}
			case *ast.AssignStmt:
				if s.Tok == token.DEFINE {
					continue // dropping a declaration does not compile
				}
			case *ast.IncDecStmt, *ast.SendStmt, *ast.DeferStmt, *ast.BranchStmt:
			default:
				continue
			}
			text := string(src[fset.Position(s.Pos()).Offset:fset.Position(s.End()).Offset])
			if i := strings.IndexByte(text, '\n'); i >= 0 {
				text = text[:i] + " ..."
			}
			add(s.Pos(), s.End(), "{}", "drop-statement", strconv.Quote(text))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if isLogCall(n) {
			return false
		}
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok == token.IMPORT {
				return false
			}
		case *ast.BlockStmt:
			dropList(n.List)
		case *ast.CaseClause:
			dropList(n.Body)
		case *ast.CommClause:
			dropList(n.Body)
		case *ast.BinaryExpr:
			op := n.Op.String()
			for _, alt := range []struct {
				name string
				m    map[token.Token]token.Token
			}{{"negate-comparison", negate}, {"comparison-boundary", boundary}, {"swap-logical", logical}, {"swap-arithmetic", arithmetic}} {
				if to, ok := alt.m[n.Op]; ok {
					add(n.OpPos, n.OpPos+token.Pos(len(op)), to.String(), alt.name, fmt.Sprintf("%q -> %q", op, to.String()))
				}
			}
		case *ast.UnaryExpr:
			if n.Op == token.NOT {
				add(n.OpPos, n.OpPos+1, "", "drop-not", `"!" -> ""`)
			}
		case *ast.Ident:
			switch n.Name {
			case "true":
				add(n.Pos(), n.End(), "false", "swap-bool", `true -> false`)
			case "false":
				add(n.Pos(), n.End(), "true", "swap-bool", `false -> true`)
			}
		case *ast.BasicLit:
			if n.Kind != token.INT {
				break
			}
			v, err := strconv.ParseInt(n.Value, 0, 64)
			if err != nil {
				break
			}
			to := v + 1
			switch v {
			case 0:
				to = 1
			case 1:
				to = 0
			}
			add(n.Pos(), n.End(), strconv.FormatInt(to, 10), "change-constant", fmt.Sprintf("%s -> %d", n.Value, to))
		}
		return true
	})
	slices.SortStableFunc(ms, func(a, b Mutant) int { return cmp.Compare(a.Start, b.Start) })
	return ms, nil
}
