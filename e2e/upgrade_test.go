//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
// leaves no room for their new pods) the rollout halts, the waiting MyWebs
// say so and keep their objects (drift in them is set back to what the
// previous templates made), a restarted operator keeps it halted; once the
// quota is gone it goes on to the end.
func TestUpgradePreviewAndPacedRollout(t *testing.T) {
	const n, batch = 6, 2
	// Only this test's MyWebs: the rollout is per kind, cluster-wide.
	mustKubectl(t, "delete", "myweb", "--all", "--all-namespaces", "--wait=true", "--timeout=60s")
	mustKubectl(t, "create", "namespace", upgradeNamespace)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", upgradeNamespace, "--wait=false") })
	var crs strings.Builder
	for i := range n {
		fmt.Fprintf(&crs, "---\napiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: web-%d, namespace: %s}\nspec: {image: nginx, nodePortNumber: %d, pageContentHtml: hello}\n", i, upgradeNamespace, 30200+i)
	}
	mustKubectl(t, "apply", "-f", writeFile(t, crs.String()))
	mustKubectl(t, "-n", upgradeNamespace, "wait", "myweb", "--all", "--for=condition=Ready", "--timeout=90s")
	v1 := mywebs(t)[upgradeNamespace+"/web-0"].Status.Templates
	if v1 == "" {
		t.Fatal("status.templates is empty")
	}
	// The running build previews no change to them.
	if out, _ := stencil(t, "diff", "--all", "-v"); strings.Contains(out, "# MyWeb ") || !regexp.MustCompile(fmt.Sprintf(`(?m)^MyWeb +%d +%d `, n, n)).MatchString(out) {
		t.Errorf("diff --all of the running build changes MyWebs:\n%s", out)
	}

	v2 := buildWithLabel(t)
	out, code := stencilBinary(t, v2, "diff", "--all")
	t.Logf("stencil diff --all with the new templates (exit %d):\n%s", code, out)
	want := regexp.MustCompile(fmt.Sprintf(`(?m)^MyWeb +%d +0 +%d +0 +0 +%d +0\s*$`, n, n, 3*n))
	if code != 1 || !want.MatchString(out) {
		t.Errorf("diff --all with the new templates: exit %d, want 1 and all %d MyWebs changed (3 objects each)", code, n)
	}
	others := regexp.MustCompile(`(?m)^(FlightTicket|Foo|Guestbook|Memcached) +(\d+) +(\d+) +0 +0 +0 +0 +0\s*$`).FindAllStringSubmatch(out, -1)
	if len(others) != 4 {
		t.Errorf("diff --all: want the 4 kinds whose templates did not change all unchanged")
	}
	for _, m := range others {
		if m[2] != m[3] {
			t.Errorf("diff --all: %s has %s resources, %s unchanged", m[1], m[2], m[3])
		}
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
	upgraded := func(name string) {
		op, err := startBinary(name, v2, fmt.Sprintf("--rollout-batch=%d", batch), "--rollout-deadline=8s")
		if err != nil {
			t.Fatal(err)
		}
		current = op
	}
	upgraded("upgraded")
	t.Cleanup(func() { restoreFirstBuild(t) })

	halted := func() error {
		reached, halted := 0, 0
		for _, w := range mywebs(t) {
			switch {
			case w.Status.Templates != v1:
				reached++
			case w.condition("Ready").Status == "True" && w.condition("Reconciling").Reason == "RolloutHalted":
				halted++
			}
		}
		if reached != batch || halted != n-batch {
			return fmt.Errorf("%d reached, %d say RolloutHalted; want %d and %d", reached, halted, batch, n-batch)
		}
		return nil
	}
	eventually(t, 90*time.Second, "the rollout halts", halted)
	if labelled := deploymentsWithLabel(t); labelled != batch {
		t.Errorf("%d Deployments have the new label while halted; want the %d reached", labelled, batch)
	}
	if events := mustKubectl(t, "-n", upgradeNamespace, "get", "events", "--field-selector=reason=RolloutHalted", "-o", "name"); events == "" {
		t.Error("no RolloutHalted event")
	}
	eventually(t, 30*time.Second, "the rollout's metrics", func() error {
		metrics := scrapeAsReader(t)
		for _, want := range []string{`stencil_rollout_halted{kind="MyWeb"} 1`, fmt.Sprintf(`stencil_rollout_resources{kind="MyWeb",state="rolling"} %d`, batch),
			fmt.Sprintf(`stencil_rollout_resources{kind="MyWeb",state="waiting"} %d`, n-batch)} {
			if !strings.Contains(metrics, want+"\n") {
				return fmt.Errorf("metrics lack %s", want)
			}
		}
		return nil
	})

	// A new operator process finds the rollout where it was: still halted,
	// reaching no other MyWeb.
	current.stop()
	upgraded("upgraded-again")
	eventually(t, 30*time.Second, "the new process leads", func() error {
		if !strings.Contains(scrapeAsReader(t), `stencil_rollout_halted{kind="MyWeb"} 1`) {
			return fmt.Errorf("not halted in the new process yet")
		}
		return nil
	})
	if err := halted(); err != nil {
		t.Errorf("after a restart: %v", err)
	}

	// Never held back: a waiting MyWeb whose spec changes, and one that
	// lost an object.
	var waiting []string
	for _, w := range mywebs(t) {
		if w.Status.Templates == v1 {
			waiting = append(waiting, w.Metadata.Name)
		}
	}
	slices.Sort(waiting)
	changed, lost := waiting[0], waiting[1]
	mustKubectl(t, "-n", upgradeNamespace, "patch", "myweb", changed, "--type=merge", "-p", `{"spec":{"image":"nginx:1.27"}}`)
	mustKubectl(t, "-n", upgradeNamespace, "delete", "service", lost)
	eventually(t, 30*time.Second, "the spec change and the lost Service applied at once", func() error {
		image := mustKubectl(t, "-n", upgradeNamespace, "get", "deployment", changed, "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		label, err := kubectl(t, "-n", upgradeNamespace, "get", "service", lost, "-o", `jsonpath={.metadata.labels.upgrade\.stencil\.dev/version}`)
		if image != "nginx:1.27" || err != nil || label != "2" {
			return fmt.Errorf("%s image %q; %s Service: %w, label %q", changed, image, lost, err, label)
		}
		return nil
	})
	webs := mywebs(t)
	for _, name := range []string{changed, lost} {
		if w := webs[upgradeNamespace+"/"+name]; w.Status.Rollout != nil {
			t.Errorf("%s was counted in the rollout: %+v", name, w.Status.Rollout)
		}
	}

	// Kept as the previous templates made them: a field another manager
	// changes in a waiting MyWeb's object is set back while the rollout is
	// halted, and nothing of the new templates comes with it.
	kept := waiting[2]
	mustKubectl(t, "-n", upgradeNamespace, "patch", "configmap", kept+"-html", "--type=merge", "-p", `{"data":{"index.html":"drifted"}}`)
	eventually(t, 30*time.Second, "the drifted ConfigMap of a waiting MyWeb set back", func() error {
		html := mustKubectl(t, "-n", upgradeNamespace, "get", "configmap", kept+"-html", "-o", `jsonpath={.data.index\.html}`)
		label := mustKubectl(t, "-n", upgradeNamespace, "get", "configmap", kept+"-html", "-o", `jsonpath={.metadata.labels.upgrade\.stencil\.dev/version}`)
		w := mywebs(t)[upgradeNamespace+"/"+kept]
		if html != "hello" || label != "" || w.Status.Templates != v1 || w.condition("Reconciling").Reason != "RolloutHalted" || w.condition("Drifted").Reason != "DriftCorrected" {
			return fmt.Errorf("index.html %q, new label %q, templates %s, Reconciling %+v, Drifted %+v", html, label, w.Status.Templates, w.condition("Reconciling"), w.condition("Drifted"))
		}
		return nil
	})

	// Room again: the rollout goes on, to every MyWeb.
	mustKubectl(t, "-n", upgradeNamespace, "delete", "quota", "pods")
	eventually(t, 120*time.Second, "every MyWeb has the new templates and is Ready", func() error {
		for key, w := range mywebs(t) {
			if w.Status.Templates == v1 || w.condition("Ready").Status != "True" || w.condition("Reconciling").Status != "" {
				return fmt.Errorf("%s: templates %s, Ready %+v, Reconciling %+v", key, w.Status.Templates, w.condition("Ready"), w.condition("Reconciling"))
			}
		}
		return nil
	})
	if labelled := deploymentsWithLabel(t); labelled != n {
		t.Errorf("%d Deployments have the new label; want all %d", labelled, n)
	}
	most, counts := watch()
	if most > batch {
		t.Errorf("up to %d MyWebs were reached by the rollout and not Ready at once; the batch is %d", most, batch)
	}
	if most == 0 {
		t.Error("no MyWeb was ever seen in the rollout (status.rollout)")
	}
	if counts < 3 {
		t.Errorf("the number of MyWebs reached took %d values; want the rollout seen in steps", counts)
	}
	t.Logf("at most %d reached and not Ready at once; %d steps seen", most, counts)
}

// deploymentsWithLabel counts the test's Deployments that the new templates
// reached.
func deploymentsWithLabel(t *testing.T) int {
	t.Helper()
	out := mustKubectl(t, "-n", upgradeNamespace, "get", "deployments", "-l", "upgrade.stencil.dev/version=2", "-o", "name")
	return len(strings.Fields(out))
}

// scrapeAsReader scrapes the current operator's metrics as a ServiceAccount
// bound to stencil-metrics-reader.
func scrapeAsReader(t *testing.T) string {
	t.Helper()
	if _, err := kubectl(t, "-n", upgradeNamespace, "get", "serviceaccount", "rollout-scraper"); err != nil {
		mustKubectl(t, "-n", upgradeNamespace, "create", "serviceaccount", "rollout-scraper")
		mustKubectl(t, "create", "clusterrolebinding", "rollout-scraper", "--clusterrole=stencil-metrics-reader", "--serviceaccount="+upgradeNamespace+":rollout-scraper")
		t.Cleanup(func() { _, _ = kubectl(t, "delete", "clusterrolebinding", "rollout-scraper") })
	}
	token := strings.TrimSpace(mustKubectl(t, "-n", upgradeNamespace, "create", "token", "rollout-scraper"))
	var body string
	eventually(t, 30*time.Second, "metrics served", func() error {
		code, b, err := tryScrape(t, current.metrics, token)
		if err != nil {
			return err // a new process not listening yet
		}
		if code != 200 {
			return fmt.Errorf("status %d", code)
		}
		body = b
		return nil
	})
	return body
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
	t.Helper()
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
		Rollout    *struct{ Templates string }
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
	byName, err := readMyWebs(t)
	if err != nil {
		t.Fatal(err)
	}
	return byName
}

// readMyWebs is mywebs that returns its error (for goroutines).
func readMyWebs(t *testing.T) (map[string]myweb, error) {
	t.Helper()
	out, err := kubectl(t, "get", "myweb", "-A", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct{ Items []myweb }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, err
	}
	byName := map[string]myweb{}
	for _, w := range list.Items {
		byName[w.Metadata.Namespace+"/"+w.Metadata.Name] = w
	}
	return byName, nil
}

// watchRollout samples every MyWeb of the cluster until the returned
// function is called, which says how many at most the rollout had reached
// and were not Ready yet at once (status.rollout), and how many different
// numbers of MyWebs with the new templates it saw.
func watchRollout(t *testing.T, v1 string) func() (int, int) {
	t.Helper()
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
			webs, err := readMyWebs(t)
			if err != nil {
				continue // the next sample
			}
			for _, w := range webs {
				if w.Status.Rollout != nil {
					rolling++
				}
				if w.Status.Templates != v1 {
					reached++
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
