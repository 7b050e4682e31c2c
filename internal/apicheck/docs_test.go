package apicheck

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository, from this package's directory.
const root = "../.."

// TestPackageDocsAreOverviews: every public package's doc.go is an overview
// of at most 100 lines; the detail lives in docs/.
func TestPackageDocsAreOverviews(t *testing.T) {
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "internal" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.Name() != "doc.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		n++
		assert.LessOrEqual(t, strings.Count(string(b), "\n"), 100, "%s: a package doc is an overview; move the detail to docs/", path)
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, n, 10, "the walk found the package docs")
}

// TestReadmeIsALandingPage: the README stays short, fits an 80-column
// terminal and states no dates.
func TestReadmeIsALandingPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	assert.LessOrEqual(t, len(lines), 200, "README.md lines")
	for i, l := range lines {
		assert.LessOrEqual(t, len([]rune(l)), 80, "README.md:%d is wider than 80 columns", i+1)
	}
	assert.NotRegexp(t, `\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b`, string(b), "README.md states a date")
}

// TestDocLinksResolve: every relative link of the README, the guides and
// the other top-level documents names a file that exists.
func TestDocLinksResolve(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range []string{"README.md", "CHANGELOG.md", "SECURITY.md", "CONTRIBUTING.md", "bench/README.md", "chaos/README.md"} {
		docs = append(docs, filepath.Join(root, f))
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			_, err := os.Stat(filepath.Join(filepath.Dir(doc), target))
			assert.NoError(t, err, "%s links to %s", doc, target)
		}
	}
	assert.Greater(t, checked, 20, "the links were found")
}

// TestMutexIsSmall: package mutex reads in one sitting (go doc -all at most
// 600 lines) and *Locker keeps at most 10 methods; the operator calls live
// in mutex/admin.
func TestMutexIsSmall(t *testing.T) {
	out, err := exec.Command("go", "doc", "-all", "github.com/redfence/redfence/mutex").Output()
	require.NoError(t, err, "go doc")
	doc := string(out)
	assert.LessOrEqual(t, strings.Count(doc, "\n"), 600, "go doc -all ./mutex lines")
	methods := regexp.MustCompile(`(?m)^func \(l \*Locker\) `).FindAllString(doc, -1)
	assert.NotEmpty(t, methods)
	assert.LessOrEqual(t, len(methods), 10, "*Locker's methods")
}
