package pgstore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/turnframe/turnframe/pgstore"
)

// sqlText tells a string literal of the store's that is SQL (or part of a
// statement) from an error message or a comment.
var sqlText = regexp.MustCompile(`\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|FROM|JOIN)\b`)

// bareTable finds a table of the store's named without a schema: a name
// after a space, a comma or nothing, where a table's name stands (not
// after the schema's dot, nor in a quoted string such as 'outbox').
var bareTable = regexp.MustCompile(`(^|[\s,])(turns|journal|events|outbox|history)\b`)

// Every statement of the store names its tables in the store's schema once
// qualified (tables.go): none reaches a table through the session's
// search_path or a temporary table an application left on a pooled
// connection. The statements are read from the package's source, every
// string literal that is SQL, so a statement added later is held to it
// without a test of its own; TestATempTableAnAppLeftOnTheSessionNeverShadowsTheStores
// shows what a bare name costs.
func TestEveryStatementNamesTheStoresSchema(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			text, err := strconv.Unquote(lit.Value)
			if err != nil || !sqlText.MatchString(text) {
				return true
			}
			checked++
			q := pgstore.Qualify("tenant", text)
			if m := bareTable.FindString(q); m != "" {
				t.Errorf("%v: a statement names %q without the store's schema:\n%s", fset.Position(lit.Pos()), strings.TrimSpace(m), q)
			}
			return true
		})
	}
	if checked < 50 {
		t.Fatalf("read %d statements: the test no longer finds the store's SQL", checked)
	}
	t.Logf("%d statements name the store's schema", checked)
}
