package apicheck

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goCmd runs the go command in dir with env added and returns its output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestCoreKnowsNoStore: the core compiles no store's client and no driver,
// and neither the root module's requirement graph nor etcddriver's (as
// `cd etcddriver && go mod graph` prints it, through etcddriver/go.work)
// names go-redis: an etcd or PostgreSQL user never downloads it.
func TestCoreKnowsNoStore(t *testing.T) {
	root := repoRoot(t)
	for _, dep := range strings.Fields(goCmd(t, root, nil, "list", "-deps", "./mutex")) {
		for _, bad := range []string{"github.com/redis/", "go.etcd.io/", "github.com/jackc/pgx",
			"github.com/redfence/redfence/redis/", "github.com/redfence/redfence/etcddriver", "github.com/redfence/redfence/pgdriver"} {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("go list -deps ./mutex lists %s", dep)
			}
		}
	}
	graphs := map[string]string{
		"the root module": goCmd(t, root, []string{"GOWORK=off"}, "mod", "graph"),
		"etcddriver":      goCmd(t, filepath.Join(root, "etcddriver"), nil, "mod", "graph"),
	}
	for who, graph := range graphs {
		if graph == "" {
			t.Fatalf("%s: go mod graph printed nothing", who)
		}
		for _, edge := range strings.Split(graph, "\n") {
			if strings.Contains(edge, "github.com/redis/go-redis") || strings.Contains(edge, "hibiken/asynq") {
				t.Errorf("%s: go mod graph has %q", who, edge)
			}
		}
	}
}

// TestDirectoriesArePackages: every directory holding Go files, in every
// module, is named as its package (main and test-only packages aside).
func TestDirectoriesArePackages(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		pkg, dir := f.Name.Name, filepath.Base(filepath.Dir(path))
		checked++
		if pkg != "main" && pkg != dir {
			t.Errorf("%s: package %s in directory %s", strings.TrimPrefix(path, root+"/"), pkg, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("walked %d Go files: not the repository", checked)
	}
}
