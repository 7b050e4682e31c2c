package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExamplesAreCopyable: the programs under examples/ import no internal/
// package (Go refuses those outside this module), so a reader can copy them.
func TestExamplesAreCopyable(t *testing.T) {
	dirs, err := filepath.Glob("../*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				assert.NotContains(t, path, "/internal/", "%s imports %s", f, path)
			}
		}
	}
}

// TestReadmeSnippetsSayTheirImports: every Go snippet of the README imports
// the package it shows, and its first screen gives the demo and the tests.
func TestReadmeSnippetsSayTheirImports(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	snippets := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(readme, -1)
	require.NotEmpty(t, snippets)
	for _, s := range snippets {
		assert.Regexp(t, `import (\(|(\w+ )?"github.com/redfence/redfence/)`, s[1], "a snippet without its import:\n%s", s[1])
	}
	lines := strings.Split(readme, "\n")
	first := strings.Join(lines[:min(30, len(lines))], "\n") // a screen
	assert.Contains(t, first, "go run ./examples/stampede")
	assert.Contains(t, first, "make test")
}
