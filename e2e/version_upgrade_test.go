//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNewVersionOverTheRelease installs this build over the released one
// (config/crd/released: its CRDs and the commit they came from): Memcacheds
// made at v1alpha1 by the released build, then the new CRD (v1 stored,
// v1alpha1 converted) and this build. The stored resources are migrated
// and status.storedVersions shrinks to [v1]; the new build re-applies no
// Deployment (the audit log has no write of one); clients read and write
// both versions.
func TestNewVersionOverTheRelease(t *testing.T) {
	const ns, crd = "version-upgrade", "memcacheds.cache.example.com"
	released := buildReleased(t)
	// The release's CRD, as a cluster running it has.
	current.stop()
	t.Cleanup(func() { restoreOperator(t, "after-version-upgrade") }) // last: it points the CRD at itself
	mustKubectl(t, "delete", "crd", crd, "--wait=true", "--timeout=60s")
	mustKubectl(t, "apply", "--server-side", "-f", "../config/crd/released/cache.example.com_memcacheds.yaml")
	mustKubectl(t, "wait", "--for=condition=Established", "crd/"+crd, "--timeout=60s")
	t.Cleanup(func() { // the suite's CRD for the tests that follow, when the test stopped before it
		if out, _ := kubectlAdmin("get", "crd", crd, "-o", "jsonpath={.spec.versions[*].name}"); strings.Contains(out, "v1 ") || strings.HasSuffix(out, "v1") {
			return
		}
		for _, args := range [][]string{{"delete", "crd", crd, "--wait=true", "--timeout=60s"}, {"apply", "--server-side", "-f", "../config/crd/bases/cache.example.com_memcacheds.yaml"}} {
			if out, err := kubectlAdmin(args...); err != nil {
				t.Errorf("installing the CRD again: %v\n%s", err, out)
			}
		}
	})
	old, err := launchWith("released", released, saKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current = old
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectlAdmin("delete", "namespace", ns, "--wait=false") })
	var crs strings.Builder
	for i := range 3 {
		fmt.Fprintf(&crs, "---\napiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: m%d, namespace: %s}\nspec: {size: %d, autoscaled: %t}\n", i, ns, i+1, i == 0)
	}
	mustKubectl(t, "apply", "-f", writeFile(t, crs.String()))
	mustKubectl(t, "-n", ns, "wait", "memcacheds.v1alpha1.cache.example.com", "--all", "--for=condition=Ready", "--timeout=90s")
	deployments := func() string {
		return mustKubectl(t, "-n", ns, "get", "deployments", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion}/{.spec.replicas} {end}`)
	}
	before := deployments()
	releasedTemplates := mustKubectl(t, "-n", ns, "get", "memcacheds.v1alpha1.cache.example.com", "m0", "-o", "jsonpath={.status.templates}")

	// This build over it: its CRD, then the operator.
	old.stop()
	mustKubectl(t, "apply", "--server-side", "-f", "../config/crd/bases/cache.example.com_memcacheds.yaml")
	if got := mustKubectl(t, "get", "crd", crd, "-o", "jsonpath={.status.storedVersions}"); !strings.Contains(got, "v1alpha1") {
		t.Fatalf("storedVersions %s: want v1alpha1 among them before the migration", got)
	}
	upgraded := time.Now()
	op, err := startOperator("new-version")
	if err != nil {
		t.Fatal(err)
	}
	current = op
	eventually(t, 90*time.Second, "storedVersions shrinks to [v1]", func() error {
		if got := mustKubectl(t, "get", "crd", crd, "-o", "jsonpath={.status.storedVersions}"); got != `["v1"]` {
			return fmt.Errorf("storedVersions %s", got)
		}
		return nil
	})
	eventually(t, 90*time.Second, "every Memcached reconciled by the new build", func() error {
		for i := range 3 {
			got := mustKubectl(t, "-n", ns, "get", "memcacheds.v1.cache.example.com", fmt.Sprintf("m%d", i), "-o", `jsonpath={.status.templates} {.status.conditions[?(@.type=="Ready")].status}`)
			if strings.HasPrefix(got, releasedTemplates+" ") || !strings.HasSuffix(got, " True") {
				return fmt.Errorf("m%d: templates and Ready %q", i, got)
			}
		}
		return nil
	})
	if after := deployments(); after != before {
		t.Errorf("the Deployments changed with the new build: before %s, after %s", before, after)
	}
	writes, requests := countWrites(t, "system:serviceaccount:stencil-system:stencil", upgraded)
	if requests == 0 {
		t.Error("the audit log holds no request of the new build: it proves nothing")
	}
	if containsResource(writes, "deployments") {
		t.Errorf("the new build wrote Deployments: %v", writes)
	}
	rewritten := map[string]bool{} // the storage migration's updates, not status writes
	for _, e := range auditEvents(t, "system:serviceaccount:stencil-system:stencil", upgraded) {
		if e.Verb == "update" && e.ObjectRef.Resource == "memcacheds" && e.ObjectRef.Namespace == ns && !strings.Contains(e.RequestURI, "/status") {
			rewritten[e.ObjectRef.Name] = true
		}
	}
	if len(rewritten) != 3 {
		t.Errorf("the new build rewrote the stored Memcacheds %v, want all 3", rewritten)
	}
	if out, code := stencil(t, "diff", "--all"); code != 0 || !strings.Contains(out, "Memcached") {
		t.Errorf("diff --all after the upgrade (exit %d):\n%s", code, out)
	}
	// Both versions, read and written.
	if got := mustKubectl(t, "-n", ns, "get", "memcacheds.v1.cache.example.com", "m0", "-o", "jsonpath={.spec.size} {.spec.autoscaling.enabled}"); got != "1 true" {
		t.Errorf("m0 at v1: %q, want 1 true", got)
	}
	mustKubectl(t, "-n", ns, "patch", "memcacheds.v1alpha1.cache.example.com", "m1", "--type=merge", "-p", `{"spec":{"size":4}}`)
	eventually(t, 60*time.Second, "a v1alpha1 write reaches the Deployment", func() error {
		if got := mustKubectl(t, "-n", ns, "get", "deployment", "m1", "-o", "jsonpath={.spec.replicas}"); got != "4" {
			return fmt.Errorf("replicas %s", got)
		}
		return nil
	})
	mustKubectl(t, "-n", ns, "patch", "memcacheds.v1.cache.example.com", "m2", "--type=merge", "-p", `{"spec":{"size":5}}`)
	if got := mustKubectl(t, "-n", ns, "get", "memcacheds.v1alpha1.cache.example.com", "m2", "-o", "jsonpath={.spec.size}"); got != "5" {
		t.Errorf("m2 at v1alpha1 after a v1 write: size %q, want 5", got)
	}
}

func containsResource(writes []string, resource string) bool {
	for _, w := range writes {
		if strings.Contains(w, " "+resource+" ") {
			return true
		}
	}
	return false
}

// buildReleased builds the commit config/crd/released names (the last
// release) from git, outside the working tree.
func buildReleased(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../config/crd/released/commit.txt")
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(data))
	dir := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C .. archive %s | tar -x -C %s", commit, dir))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting the released commit %s (a clone with its history is needed): %v\n%s", commit, err, out)
	}
	bin := filepath.Join(dir, "stencil-released")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the released commit %s: %v\n%s", commit, err, out)
	}
	return bin
}
