package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stencil-operator/stencil/internal/kinds"
)

// The summary counts resources by what happens to them and objects by
// what happens to each; the details list only resources that change or
// fail, in order, with their diffs.
func TestFleetReport(t *testing.T) {
	loaded, err := kinds.Load()
	if err != nil {
		t.Fatal(err)
	}
	diffs := []*resourceDiff{
		{kind: "MyWeb", namespace: "b", name: "web", changed: []string{"Deployment b/web"}, diffs: []string{"--- live/Deployment/b/web\n"}},
		{kind: "MyWeb", namespace: "a", name: "web", created: []string{"ConfigMap a/extra"}, pruned: []string{"Service a/web"}, diffs: []string{"+++ merged/ConfigMap/a/extra\n"}},
		{kind: "MyWeb", namespace: "a", name: "same"},
		{kind: "Foo", namespace: "a", name: "broken", err: errors.New("template: deployment.yaml:3: boom"), render: true},
	}
	var details, summary bytes.Buffer
	if err := printDetails(&details, diffs); err != nil {
		t.Fatal(err)
	}
	if err := printSummary(&summary, loaded, diffs); err != nil {
		t.Fatal(err)
	}
	wantDetails := "# Foo a/broken\n#   error: template: deployment.yaml:3: boom\n" +
		"# MyWeb a/web\n#   create ConfigMap a/extra\n#   prune Service a/web\n+++ merged/ConfigMap/a/extra\n" +
		"# MyWeb b/web\n#   change Deployment b/web\n--- live/Deployment/b/web\n"
	if details.String() != wantDetails {
		t.Errorf("details:\n%s\nwant:\n%s", details.String(), wantDetails)
	}
	for _, line := range []string{
		"KIND          RESOURCES  UNCHANGED  CHANGED  FAILING  CREATE  CHANGE  PRUNE",
		"Foo           1          0          0        1        0       0       0",
		"Guestbook     0          0          0        0        0       0       0",
		"MyWeb         3          1          2        0        1       1       1",
	} {
		if !strings.Contains(summary.String(), line+"\n") {
			t.Errorf("summary lacks %q:\n%s", line, summary.String())
		}
	}
}

// diff takes -f or --all, not both, not neither.
func TestDiffNeedsOneInput(t *testing.T) {
	for _, args := range [][]string{{"diff"}, {"diff", "--all", "-f", "x.yaml"}} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		var exit *exitError
		if !errors.As(err, &exit) || exit.code != 2 || !strings.Contains(err.Error(), "either -f FILE or --all") {
			t.Errorf("%v: %v, want exit 2 asking for one input", args, err)
		}
	}
}
