package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Files is every file under root, by path, with its content: a test
// compares two of them to see that a refused command wrote nothing.
func Files(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
