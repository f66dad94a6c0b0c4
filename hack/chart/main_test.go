package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestChartIsUpToDate: dist/chart is what hack/chart makes of config/default
// now (run `make manifests` after changing config/).
func TestChartIsUpToDate(t *testing.T) {
	want, err := chart("../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	err = filepath.WalkDir("../../dist/chart", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel("../../dist/chart", path)
		got[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("dist/chart/%s is out of date; run make manifests", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("dist/chart/%s is not made from config/default any more; run make manifests", name)
		}
	}
}
