package docs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEvolveAPIShowsTheShippedFiles: the conversion templates
// docs/evolve-api.md shows are the shipped ones, byte for byte, and its
// lint output is what lint prints (TestLintRefusesAnUncoveredConversion
// and the e2e TestConversionWebhook run the guide's other steps).
func TestEvolveAPIShowsTheShippedFiles(t *testing.T) {
	doc, err := os.ReadFile("evolve-api.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile("(?s)`(templates/[^`]+\\.yaml)` \\([^)]*\\):\n\n```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(shown) != 2 {
		t.Fatalf("the guide shows %d template files, want the 2 conversion templates", len(shown))
	}
	for _, m := range shown {
		file, err := os.ReadFile("../" + m[1])
		if err != nil {
			t.Fatal(err)
		}
		if string(file) != m[2] {
			t.Errorf("the guide's %s differs from the file:\n--- guide\n%s--- file\n%s", m[1], m[2], file)
		}
	}
	lint, err := os.ReadFile("../internal/cli/lint_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`want := "(templates/memcached: spec.driftPolicy of v1 is lost[^"]*)"`).FindSubmatch(lint)
	if want == nil || !strings.Contains(string(doc), string(want[1])) {
		t.Error("the guide's lint output is not the one TestLintRefusesAnUncoveredConversion checks")
	}
}
