package layers

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/srt-mcp/srt-mcp/"

// The doors: each maps its wire format onto service calls.
var doors = []string{"mcpserver", "librechat", "playground", "ops", "downloads"}

// doorMayImport is all a door may import of the module.
var doorMayImport = []string{"service", "guard", "errs"}

// upper is what wires or drives the server: the doors, the server's
// wiring, the commands, the benchmarks, the black-box suite.
var upper = append([]string{"server", "cmd", "bench", "integration", "layers"}, doors...)

// imports reads the module-internal imports of every package (build tags
// ignored: every file counts), by package directory relative to root.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(path, module); ok {
				out[dir] = append(out[dir], rest)
			}
		}
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// top is a package's first path element ("cmd/srt-mcp" is "cmd").
func top(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	return first
}

func in(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestImportDirection(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no module at %s: %v", root, err)
	}
	all := imports(t, root)
	var pkgs []string
	for p := range all {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, d := range doors {
		if _, ok := all[d]; !ok {
			t.Errorf("door %s not found: update the list", d)
		}
	}
	for _, pkg := range pkgs {
		for _, im := range all[pkg] {
			switch {
			case in(doors, pkg) && !in(doorMayImport, im):
				t.Errorf("door %s imports %s: a door speaks only to %s", pkg, im, strings.Join(doorMayImport, ", "))
			case !in(upper, top(pkg)) && in(upper, top(im)):
				t.Errorf("%s (the lower half) imports %s (the upper)", pkg, im)
			case top(im) == "cmd":
				t.Errorf("%s imports %s: nothing imports a command", pkg, im)
			case pkg == "service" && im == "guard":
				t.Errorf("service imports guard: the service knows nothing of HTTP; the doors tell it the caller")
			}
		}
	}
}

// The rules catch what they are for: a door reaching past the service, the
// lower half reaching up.
func TestImportRulesCatch(t *testing.T) {
	for _, tc := range []struct {
		pkg, im string
		bad     bool
	}{
		{"mcpserver", "executions", true},
		{"playground", "sessions", true},
		{"mcpserver", "service", false},
		{"service", "mcpserver", true},
		{"runner", "server", true},
		{"sessions", "backend", false},
	} {
		bad := (in(doors, tc.pkg) && !in(doorMayImport, tc.im)) || (!in(upper, top(tc.pkg)) && in(upper, top(tc.im)))
		if bad != tc.bad {
			t.Errorf("%s -> %s: flagged %v, want %v", tc.pkg, tc.im, bad, tc.bad)
		}
	}
}
