package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
)

func TestPercentile(t *testing.T) {
	var sorted []time.Duration
	for i := 1; i <= 100; i++ {
		sorted = append(sorted, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		p    int
		in   []time.Duration
		want time.Duration
	}{
		{50, sorted, 50 * time.Millisecond},
		{99, sorted, 99 * time.Millisecond},
		{99, sorted[:10], 10 * time.Millisecond},
		{50, sorted[:1], 1 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.in, tt.p); got != tt.want {
			t.Errorf("p%d of %d values = %s, want %s", tt.p, len(tt.in), got, tt.want)
		}
	}
}

func TestParseMemory(t *testing.T) {
	peak, file, err := parseMemory("Name:\tstencil\nVmHWM:\t   93032 kB\nVmRSS:\t   80000 kB\nRssAnon:\t   42000 kB\nRssFile:\t   37748 kB\n")
	if err != nil || peak != 93032 || file != 37748 {
		t.Errorf("parseMemory = %d, %d, %v; want 93032, 37748, nil", peak, file, err)
	}
	if _, _, err := parseMemory("VmRSS:\t1 kB\n"); err == nil {
		t.Error("no VmHWM line: want an error")
	}
}

func TestCountRequests(t *testing.T) {
	log := `{"auditID":"1","stage":"ResponseComplete","verb":"patch","user":{"username":"stencil"},"objectRef":{"resource":"configmaps"},"requestReceivedTimestamp":"2026-11-21T10:00:01.000000Z"}
{"auditID":"2","stage":"ResponseComplete","verb":"patch","user":{"username":"stencil"},"objectRef":{"resource":"mywebs","subresource":"status"},"requestReceivedTimestamp":"2026-11-21T10:00:02.000000Z"}
{"auditID":"3","stage":"ResponseStarted","verb":"watch","user":{"username":"stencil"},"objectRef":{"resource":"services"},"requestReceivedTimestamp":"2026-11-21T10:00:01.500000Z"}
{"auditID":"3","stage":"ResponseComplete","verb":"watch","user":{"username":"stencil"},"objectRef":{"resource":"services"},"requestReceivedTimestamp":"2026-11-21T10:00:01.500000Z"}
{"auditID":"4","stage":"ResponseComplete","verb":"get","user":{"username":"stencil"},"requestURI":"/apis?timeout=32s","requestReceivedTimestamp":"2026-11-21T10:00:01.000000Z"}
{"auditID":"5","stage":"ResponseComplete","verb":"patch","user":{"username":"rawapply"},"objectRef":{"resource":"configmaps"},"requestReceivedTimestamp":"2026-11-21T10:00:01.000000Z"}
{"auditID":"6","stage":"ResponseComplete","verb":"patch","user":{"username":"stencil"},"objectRef":{"resource":"configmaps"},"requestReceivedTimestamp":"2026-11-21T10:00:09.000000Z"}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	got, err := countRequests(path, "stencil", from, from.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := requests{"patch configmaps": 1, "patch mywebs/status": 1, "watch services": 1, "get /apis": 1}
	if len(got) != len(want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d", k, got[k], v)
		}
	}
	if got.total() != 3 {
		t.Errorf("total (watches aside) = %d, want 3", got.total())
	}
}

func TestCombineTakesTheMedianRun(t *testing.T) {
	runs := []*result{
		{Contender: "stencil", Converge: 3 * time.Second, PeakRSSKiB: 10, ConvergeCPUSeconds: 3},
		{Contender: "stencil", Converge: 1 * time.Second, PeakRSSKiB: 30, ConvergeCPUSeconds: 1},
		{Contender: "stencil", Converge: 2 * time.Second, PeakRSSKiB: 20, ConvergeCPUSeconds: 2, Drift: driftFigures{Changes: 100}},
	}
	r := combine(runs)
	if r.Converge != 2*time.Second || r.ConvergeCPUSeconds != 2 {
		t.Errorf("converge %s, CPU %.0f; want the median run's, 2s and 2", r.Converge, r.ConvergeCPUSeconds)
	}
	if r.PeakRSSKiB != 30 {
		t.Errorf("peak RSS %d, want the highest, 30", r.PeakRSSKiB)
	}
	if r.Drift.Changes != 100 || len(r.Runs) != 3 {
		t.Errorf("want the last run's drift figures and all 3 converge times, got %+v", r)
	}
}

// TestWriteJobs: one line per MyWeb with its three rendered objects; with
// status, a merge patch that marks it applied for its generation (Ready
// False, Progressing: no Deployment becomes available in the bench) and lists
// what was applied.
func TestWriteJobs(t *testing.T) {
	webs := myWebs(3, 2)
	for _, w := range webs {
		w.TypeMeta = metav1.TypeMeta{} // as after the client created them
	}
	for _, withStatus := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "jobs.jsonl")
		if err := writeJobs(path, webs, withStatus); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != len(webs) {
			t.Fatalf("%d lines, want one per MyWeb", len(lines))
		}
		for i, line := range lines {
			var j rawJob
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				t.Fatal(err)
			}
			if len(j.Objects) != 3 {
				t.Errorf("line %d: %d objects, want 3", i, len(j.Objects))
			}
			if !withStatus {
				if j.Status != nil {
					t.Errorf("line %d: a status without -status", i)
				}
				continue
			}
			if j.Status == nil || j.Status.Name != webs[i].Name || j.Status.Namespace != webs[i].Namespace || j.Status.Kind != "MyWeb" {
				t.Fatalf("line %d: status for %+v, want MyWeb %s/%s", i, j.Status, webs[i].Namespace, webs[i].Name)
			}
			var status struct {
				Status operatorv1.MyWebStatus `json:"status"`
			}
			js, _ := json.Marshal(j.Status.Patch)
			if err := json.Unmarshal(js, &status); err != nil {
				t.Fatal(err)
			}
			s := status.Status
			web := &operatorv1.MyWeb{Status: s}
			web.Generation = 1
			if s.ObservedGeneration != 1 || !isReady(web) || !meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReconciling) ||
				!meta.IsStatusConditionFalse(s.Conditions, v1alpha1.ConditionDrifted) || len(s.Inventory) != 3 {
				t.Errorf("line %d: status %+v, want applied and Progressing, not Drifted, generation 1, 3 objects in the inventory", i, s)
			}
		}
	}
	if webs[0].UID != "" {
		t.Error("writeJobs changed the MyWebs it was given")
	}
}

func TestParseSteal(t *testing.T) {
	tests := []struct {
		stat    string
		want    float64
		wantErr bool
	}{
		{"cpu  100 0 50 900 3 0 1 250 0 0\ncpu0 50 0 25 450 1 0 1 125 0 0\n", 2.5, false},
		{"cpu0 50 0 25 450 1 0 1 125 0 0\n", 0, true},
		{"cpu  100 0 50 900 3 0 1 x 0 0\n", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSteal(tt.stat)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("parseSteal(%q) = %v, %v; want %v (error: %v)", tt.stat, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestRenderCost measures the schema check's cost on a few MyWebs, offline.
func TestRenderCost(t *testing.T) {
	note, err := renderCost(20, 10, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note, "Render cost, N = 20 MyWebs") || !strings.Contains(note, "schema check") {
		t.Errorf("note: %s", note)
	}
	t.Log(note)
}
