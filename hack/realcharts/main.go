// Command realcharts measures `stencil import chart` on real charts: for
// each chart folder it converts the chart, declares the kind, builds its
// spec schema, and compares the kind's render of each values file with
// helm template's, object by object. It prints a markdown table, one row
// per chart, and then every difference and failure.
//
//	go run ./hack/realcharts -helm bin/helm CHART_DIR...
//	go run ./hack/realcharts -live CHART_DIR...
//
// hack/realcharts/charts.sh fetches the charts of docs/from-helm.md at
// their commits.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/dev/chartimport"
)

// tplPolicy is -tpl.
var tplPolicy string

func main() {
	helm := flag.String("helm", "bin/helm", "The helm binary to compare with.")
	flag.StringVar(&tplPolicy, "tpl", "", "The kinds' tpl policy (own, the default, or any): with any, a values file that gives tpl a value with template actions renders, as Helm does.")
	live := flag.Bool("live", false, "Run each chart's kind on a local control plane instead: its default values Ready, a value changed and Ready again, the resource deleted and nothing of stencil's left.")
	flag.Parse()
	if *live {
		if err := runLive(flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var details strings.Builder
	fmt.Println("| chart | templates kept/total | notes | values files | objects as helm template's, per values file |")
	fmt.Println("|---|---|---|---|---|")
	failed := false
	for _, dir := range flag.Args() {
		row, err := measure(*helm, dir, &details)
		if err != nil {
			row = fmt.Sprintf("| %s | %v | | | |", filepath.Base(dir), err)
			failed = true
		}
		fmt.Println(row)
	}
	fmt.Print("\n", details.String())
	if failed {
		os.Exit(1)
	}
}

// measure imports the chart at dir and compares it with helm template;
// the table row, and the differences and failures into details.
func measure(helm, dir string, details io.Writer) (string, error) {
	c, err := chartimport.Load(dir)
	if err != nil {
		return "", err
	}
	f, err := chartimport.Convert(c)
	if err != nil {
		return "", err
	}
	f.Tpl = tplPolicy
	gvk := schema.GroupVersionKind{Group: "charts.example.com", Version: "v1alpha1", Kind: "Chart"}
	decl, skipped, err := declare(gvk, f, dir, c.ValuesFiles())
	for _, s := range skipped {
		_, _ = fmt.Fprintf(details, "- %s: not declared from %s\n", c.Name, s)
	}
	if err != nil {
		return "", err
	}
	if err := checkSchema(f, decl); err != nil {
		return "", fmt.Errorf("schema: %w", err)
	}
	k, err := chartimport.Kind(gvk, f, decl)
	if err != nil {
		return "", err
	}
	results, err := chartimport.Verify(helm, dir, c, k, "rel", "ns1")
	if err != nil {
		return "", err
	}
	var cells []string
	for _, r := range results {
		if r.Err != nil {
			cells = append(cells, fmt.Sprintf("%s: fails", filepath.Base(r.ValuesFile)))
			_, _ = fmt.Fprintf(details, "- %s %s: %v\n", c.Name, r.ValuesFile, r.Err)
			continue
		}
		cells = append(cells, fmt.Sprintf("%s: %d/%d", filepath.Base(r.ValuesFile), r.Equal, r.Objects))
		for _, d := range r.Differences {
			_, _ = fmt.Fprintf(details, "- %s %s\n```\n%s\n```\n", c.Name, d.ValuesFile+" "+d.Object, d.Diff)
		}
	}
	kept, total := templates(c, f)
	return fmt.Sprintf("| %s %s | %d/%d | %d | %d | %s |", c.Name, version(c), kept, total, len(f.Notes), len(results), strings.Join(cells, ", ")), nil
}

// declare declares the kind from the values files that render; those that
// do not (a random password the chart would generate) are returned.
func declare(gvk schema.GroupVersionKind, f *chartimport.Folder, dir string, files []string) ([]byte, []string, error) {
	var good []chartimport.ValuesFile
	var skipped []string
	for _, vf := range files {
		values, err := readValues(dir, vf)
		if err != nil {
			return nil, nil, err
		}
		if _, err := chartimport.Declare(gvk, f, []chartimport.ValuesFile{{Path: vf, Values: values}}); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s (%v)", vf, err))
			continue
		}
		good = append(good, chartimport.ValuesFile{Path: vf, Values: values})
	}
	if len(good) == 0 {
		return nil, skipped, errors.New("no values file renders")
	}
	decl, err := chartimport.Declare(gvk, f, good)
	return decl, skipped, err
}

func readValues(dir, file string) (map[string]any, error) {
	values := map[string]any{}
	if file == "values.yaml" {
		return values, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &values); err != nil || values == nil {
		return map[string]any{}, err
	}
	return values, nil
}

// checkSchema builds the kind's spec schema, as stencil manifests does.
func checkSchema(f *chartimport.Folder, decl []byte) error {
	fsys := fstest.MapFS{"_kind.yaml": {Data: decl}}
	for name, data := range f.Files {
		fsys[name] = &fstest.MapFile{Data: data}
	}
	_, _, err := chartimport.FolderSchema(fsys)
	return err
}

// templates counts the chart's template files (its subcharts' too) and
// those the kind keeps.
func templates(c *chartimport.Chart, f *chartimport.Folder) (kept, total int) {
	count := func(files map[string][]byte) int {
		n := 0
		for p := range files {
			if strings.HasPrefix(p, "templates/") {
				n++
			}
		}
		return n
	}
	total = count(c.Files)
	subs, _ := c.Subcharts()
	for _, s := range subs {
		total += count(s.Files)
	}
	for name := range f.Files {
		if !strings.HasPrefix(name, "_") || strings.HasSuffix(name, ".tpl") {
			kept++
		}
	}
	return kept, total
}

func version(c *chartimport.Chart) string {
	var meta struct {
		Version string `json:"version"`
	}
	_ = yaml.Unmarshal(c.Files["Chart.yaml"], &meta)
	return meta.Version
}
