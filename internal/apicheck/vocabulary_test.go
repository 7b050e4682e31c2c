package apicheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository's top, two folders up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// vocabulary reads the "Options by package" table of docs/vocabulary.md:
// package path → its options.
func vocabulary(t *testing.T, root string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "vocabulary.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## Options by package")
	if !ok {
		t.Fatal(`docs/vocabulary.md has no "## Options by package" section`)
	}
	row := regexp.MustCompile(`(?m)^\| ([a-z/]+) \|([^|]*)\|$`)
	out := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		if m[1] == "package" {
			continue // the header
		}
		var opts []string
		for o := range strings.SplitSeq(m[2], ",") {
			if o = strings.TrimSpace(o); o != "" {
				opts = append(opts, o)
			}
		}
		out[m[1]] = opts
	}
	return out
}

// exportedOptions lists the exported functions named With… declared in
// the package in dir (tests left out).
func exportedOptions(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && fn.Name.IsExported() && strings.HasPrefix(fn.Name.Name, "With") {
				out = append(out, fn.Name.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestOptionVocabulary holds every public package's options against the
// table of docs/vocabulary.md: an option a package adds, renames or drops
// without the table changing fails here, and so does a public package the
// table does not list.
func TestOptionVocabulary(t *testing.T) {
	root := repoRoot(t)
	table := vocabulary(t, root)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if !d.IsDir() {
			return nil
		}
		switch base := d.Name(); {
		case rel == ".":
			return nil
		case strings.HasPrefix(base, ".") || base == "internal" || base == "testdata" ||
			base == "examples" || base == "bench" || base == "cmd" || base == "chaos" || base == "docs" || base == "scripts" || base == "lua":
			return filepath.SkipDir
		}
		if opts := exportedOptions(t, path); len(opts) > 0 || table[rel] != nil {
			seen[rel] = true
			want, listed := table[rel]
			if !listed {
				t.Errorf("package %s has options %v but no row in docs/vocabulary.md", rel, opts)
				return nil
			}
			want = slices.Sorted(slices.Values(want))
			if !slices.Equal(opts, want) {
				t.Errorf("package %s: options %v, docs/vocabulary.md lists %v", rel, opts, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg, opts := range table {
		if len(opts) > 0 && !seen[pkg] {
			t.Errorf("docs/vocabulary.md lists package %s, which has no options here", pkg)
		}
	}
}
