//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// upgradeNamespace holds the MyWebs of TestUpgradePreviewAndPacedRollout.
const upgradeNamespace = "upgrade"

// TestUpgradePreviewAndPacedRollout builds a second stencil whose MyWeb
// templates put a new label on every object (the Deployment's pods too),
// previews the upgrade with `diff --all`, then runs it in place of the
// first with --rollout-batch=2: the change reaches at most 2 MyWebs at a
// time; when the first ones it reaches cannot become Ready (a pod quota
// leaves no room for their new pods) the rollout halts, and the waiting
// MyWebs say so; once the quota is gone it goes on to the end.
func TestUpgradePreviewAndPacedRollout(t *testing.T) {
	const n, batch = 6, 2
	mustKubectl(t, "create", "namespace", upgradeNamespace)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", upgradeNamespace, "--wait=false") })
	var crs strings.Builder
	for i := range n {
		fmt.Fprintf(&crs, "---\napiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: web-%d, namespace: %s}\nspec: {image: nginx, nodePortNumber: %d, pageContentHtml: hello}\n", i, upgradeNamespace, 30200+i)
	}
	mustKubectl(t, "apply", "-f", writeFile(t, crs.String()))
	mustKubectl(t, "-n", upgradeNamespace, "wait", "myweb", "--all", "--for=condition=Ready", "--timeout=90s")
	before := mywebs(t)
	v1 := before[upgradeNamespace+"/web-0"].Status.Templates
	if v1 == "" {
		t.Fatal("status.templates is empty")
	}
	// The running build previews nothing for these resources.
	if out, _ := stencil(t, "diff", "--all", "-v"); strings.Contains(out, "# MyWeb "+upgradeNamespace+"/") {
		t.Errorf("diff --all of the running build shows changes to %s:\n%s", upgradeNamespace, out)
	}

	v2 := buildWithLabel(t)
	out, code := stencilBinary(t, v2, "diff", "--all")
	t.Logf("stencil diff --all with the new templates (exit %d):\n%s", code, out)
	want := regexp.MustCompile(fmt.Sprintf(`(?m)^MyWeb +%d +0 +%d +0 +0 +%d +0\s*$`, len(before), len(before), 3*len(before)))
	if code != 1 || !want.MatchString(out) {
		t.Errorf("diff --all with the new templates: exit %d, want 1 and all %d MyWebs changed (3 objects each):\n%s", code, len(before), out)
	}
	if m := regexp.MustCompile(`(?m)^(FlightTicket|Foo|Guestbook|Memcached) +(\d+) +(\d+) `).FindAllStringSubmatch(out, -1); len(m) != 4 || m[0][2] != m[0][3] {
		t.Errorf("diff --all: the kinds whose templates did not change should be unchanged:\n%s", out)
	}
	out, _ = stencilBinary(t, v2, "diff", "--all", "-v")
	if !strings.Contains(out, "# MyWeb "+upgradeNamespace+"/web-0") || !strings.Contains(out, `+    upgrade.stencil.dev/version: "2"`) {
		t.Errorf("diff --all -v does not show the new label on web-0:\n%s", out)
	}

	// No room for new pods: the MyWebs the rollout reaches first cannot
	// become Ready.
	mustKubectl(t, "-n", upgradeNamespace, "create", "quota", "pods", fmt.Sprintf("--hard=pods=%d", n))
	eventually(t, 30*time.Second, "the quota counts the pods", func() error {
		if used := mustKubectl(t, "-n", upgradeNamespace, "get", "quota", "pods", "-o", "jsonpath={.status.used.pods}"); used != fmt.Sprint(n) {
			return fmt.Errorf("used pods %q", used)
		}
		return nil
	})

	watch := watchRollout(t, v1)
	current.stop()
	next, err := startBinary("upgraded", v2, fmt.Sprintf("--rollout-batch=%d", batch), "--rollout-deadline=8s")
	if err != nil {
		t.Fatal(err)
	}
	current = next
	t.Cleanup(func() { restoreFirstBuild(t) })

	// Halted: two of ours reached and stuck, the others wait, Stalled.
	eventually(t, 90*time.Second, "the rollout halts", func() error {
		rolled, halted := 0, 0
		for key, w := range mywebs(t) {
			if !strings.HasPrefix(key, upgradeNamespace+"/") {
				continue
			}
			switch ready := w.condition("Ready"); {
			case w.Status.Templates != v1:
				rolled++
			case ready.Reason == "RolloutHalted" && w.condition("Stalled").Status == "True":
				halted++
			}
		}
		if rolled != batch || halted != n-batch {
			return fmt.Errorf("%d reached, %d say RolloutHalted; want %d and %d", rolled, halted, batch, n-batch)
		}
		return nil
	})
	if events := mustKubectl(t, "-n", upgradeNamespace, "get", "events", "--field-selector=reason=RolloutHalted", "-o", "name"); events == "" {
		t.Error("no RolloutHalted event")
	}

	// Room again: the rollout goes on, to every MyWeb.
	mustKubectl(t, "-n", upgradeNamespace, "delete", "quota", "pods")
	eventually(t, 120*time.Second, "every MyWeb has the new templates and is Ready", func() error {
		for key, w := range mywebs(t) {
			if w.Status.Templates == v1 || w.condition("Ready").Status != "True" {
				return fmt.Errorf("%s: templates %s, Ready %+v", key, w.Status.Templates, w.condition("Ready"))
			}
		}
		return nil
	})
	if label := mustKubectl(t, "-n", upgradeNamespace, "get", "deployment", "web-5", "-o", `jsonpath={.metadata.labels.upgrade\.stencil\.dev/version}`); label != "2" {
		t.Errorf("web-5's Deployment label = %q, want the new template's", label)
	}
	most, counts := watch()
	if most > batch {
		t.Errorf("up to %d MyWebs were reached and not Ready at once; the batch is %d", most, batch)
	}
	if counts < 3 {
		t.Errorf("the number of MyWebs reached took %d values; want the rollout seen in steps", counts)
	}
	t.Logf("at most %d reached and not Ready at once; %d steps seen", most, counts)
}

// buildWithLabel builds stencil with MyWeb templates that add a label to
// every object, through a build overlay of the repository's own sources.
func buildWithLabel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	helpers, err := filepath.Abs("../templates/myweb/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	src := mustReadFile(t, helpers)
	changed := strings.Replace(src, "app.kubernetes.io/component: web", "app.kubernetes.io/component: web\nupgrade.stencil.dev/version: \"2\"", 1)
	if changed == src {
		t.Fatal("the MyWeb labels template changed; update the test")
	}
	edited, overlay := filepath.Join(dir, "_helpers.tpl"), filepath.Join(dir, "overlay.json")
	raw, _ := json.Marshal(map[string]any{"Replace": map[string]string{helpers: edited}})
	if err := os.WriteFile(edited, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(overlay, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "stencil")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-overlay", overlay, "-o", bin, ".")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the second stencil: %v\n%s", err, out)
	}
	return bin
}

// restoreFirstBuild stops the upgraded operator and starts bin/stencil
// again for the tests that follow.
func restoreFirstBuild(t *testing.T) {
	current.stop()
	op, err := startOperator("first-again")
	if err != nil {
		t.Fatal(err)
	}
	current = op
}

// myweb is the part of a MyWeb the test reads.
type myweb struct {
	Metadata struct{ Namespace, Name string }
	Status   struct {
		Templates  string
		Conditions []struct{ Type, Status, Reason string }
	}
}

func (w myweb) condition(typ string) struct{ Type, Status, Reason string } {
	for _, c := range w.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return struct{ Type, Status, Reason string }{}
}

// mywebs reads every MyWeb of the cluster, by namespace/name.
func mywebs(t *testing.T) map[string]myweb {
	t.Helper()
	out, err := kubectl(t, "get", "myweb", "-A", "-o", "json")
	if err != nil {
		t.Error(err)
		return nil
	}
	var list struct{ Items []myweb }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	byName := map[string]myweb{}
	for _, w := range list.Items {
		byName[w.Metadata.Namespace+"/"+w.Metadata.Name] = w
	}
	return byName
}

// watchRollout samples every MyWeb of the cluster until the returned
// function is called, which says how many at most were reached by the new
// templates and not Ready at once, and how many different numbers of
// reached MyWebs it saw.
func watchRollout(t *testing.T, v1 string) func() (int, int) {
	stop, done := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	most, seen := 0, map[int]bool{}
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			reached, rolling := 0, 0
			for _, w := range mywebs(t) {
				if w.Status.Templates == v1 {
					continue
				}
				reached++
				if w.condition("Ready").Status != "True" {
					rolling++
				}
			}
			mu.Lock()
			most, seen[reached] = max(most, rolling), true
			mu.Unlock()
		}
	}()
	var once sync.Once
	end := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(end)
	return func() (int, int) {
		end()
		mu.Lock()
		defer mu.Unlock()
		return most, len(seen)
	}
}
