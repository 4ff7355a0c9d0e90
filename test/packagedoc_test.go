package test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasADocComment enforces that every package of the module
// says what it is for: one of its files (a test file, for a package of
// tests only) carries a package doc comment.
func TestEveryPackageHasADocComment(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Dir}}\t{{join .GoFiles \" \"}} {{join .CgoFiles \" \"}} {{join .TestGoFiles \" \"}} {{join .XTestGoFiles \" \"}}", "github.com/roostfleet/roost/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list printed %d packages; want the whole module:\n%s", len(lines), out)
	}
	for _, line := range lines {
		parts := strings.SplitN(line, "\t", 4)
		if len(parts) != 4 {
			t.Fatalf("go list printed %q", line)
		}
		pkg, name, dir, files := parts[0], parts[1], parts[2], strings.Fields(parts[3])
		if !hasPackageDoc(t, dir, files) {
			t.Errorf("package %s has no doc comment: add one (\"// Package %s …\", usually in doc.go)", pkg, name)
		}
	}
}

// hasPackageDoc says whether one of files in dir has a comment on its
// package clause.
func hasPackageDoc(t *testing.T, dir string, files []string) bool {
	t.Helper()
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" {
			return true
		}
	}
	return false
}
