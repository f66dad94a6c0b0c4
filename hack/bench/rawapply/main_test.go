package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadJobs reads the lines the bench writes (hack/bench writeJobs):
// objects, and a status patch or none.
func TestReadJobs(t *testing.T) {
	input := `{"objects":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"}},{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","namespace":"n"}}]}
{"objects":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"b","namespace":"n"}}],"status":{"apiVersion":"operator.k8s-summit.org/v1","kind":"MyWeb","namespace":"n","name":"b","patch":{"status":{"observedGeneration":1}}}}
`
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(path, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs, err := readJobs(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || len(jobs[0].Objects) != 2 || len(jobs[1].Objects) != 1 {
		t.Fatalf("read %+v, want 2 jobs of 2 and 1 objects", jobs)
	}
	if jobs[0].Objects[1].GetKind() != "Deployment" || jobs[0].Objects[1].GetNamespace() != "n" {
		t.Errorf("second object read as %s in %q", jobs[0].Objects[1].GetKind(), jobs[0].Objects[1].GetNamespace())
	}
	if jobs[0].Status != nil {
		t.Error("first job: a status where the line has none")
	}
	s := jobs[1].Status
	if s == nil || s.Kind != "MyWeb" || s.Name != "b" || string(s.Patch) != `{"status":{"observedGeneration":1}}` {
		t.Errorf("second job's status read as %+v", s)
	}
	if _, err := readJobs(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file: want an error")
	}
}
