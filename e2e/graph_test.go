//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAppStackGraph drives the showcase graph kind (templates/appstack)
// with kubectl against the real binary, on kwok pods: the database's pod
// becomes ready and the migration Job's pod completes. It checks that the
// graph converges in order (the Job after the database is ready, the app
// after the Job completed), that a new version runs its Job before the app
// changes, that a change of the external settings ConfigMap reaches the
// app, and that deletion goes in reverse order.
func TestAppStackGraph(t *testing.T) {
	const ns = graphNamespace
	mustKubectl(t, "create", "namespace", ns)
	mustKubectl(t, "-n", ns, "create", "configmap", "shop-settings", "--from-literal=log-level=info")
	mustKubectl(t, "apply", "-f", writeFile(t, `apiVersion: stacks.stencil.dev/v1alpha1
kind: AppStack
metadata: {name: shop, namespace: graph}
spec: {version: "1.0.0", settings: shop-settings}
`))
	mustKubectl(t, "-n", ns, "wait", "appstack/shop", "--for=condition=Ready", "--timeout=120s")
	t.Logf("kubectl get appstack,statefulset,job,deployment:\n%s", mustKubectl(t, "-n", ns, "get", "appstack,statefulset,job,deployment"))

	// In order: the Job was created once the database's pod was ready, the
	// app once the Job had completed (timestamps have second precision).
	dbReady := timeOf(t, "pod", "shop-db-0", `{.status.conditions[?(@.type=="Ready")].lastTransitionTime}`)
	jobCreated := timeOf(t, "job", "shop-migrate-1-0-0", "{.metadata.creationTimestamp}")
	jobDone := timeOf(t, "job", "shop-migrate-1-0-0", "{.status.completionTime}")
	appCreated := timeOf(t, "deployment", "shop", "{.metadata.creationTimestamp}")
	if jobCreated.Before(dbReady) {
		t.Errorf("the migration Job was created at %s, before the database was ready at %s", jobCreated, dbReady)
	}
	if appCreated.Before(jobDone) {
		t.Errorf("the app was created at %s, before the migration completed at %s", appCreated, jobDone)
	}
	if env := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", `jsonpath={.spec.template.spec.containers[0].env[?(@.name=="SETTINGS_LOG_LEVEL")].value}`); env != "info" {
		t.Errorf("SETTINGS_LOG_LEVEL = %q, want info (from the settings ConfigMap)", env)
	}

	// A new version: its Job runs, then the app changes. The app waits
	// meanwhile, and keeps running (the same Deployment throughout).
	appUID := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", "jsonpath={.metadata.uid}")
	mustKubectl(t, "-n", ns, "patch", "appstack", "shop", "--type=merge", "-p", `{"spec":{"version":"1.1.0"}}`)
	eventually(t, 120*time.Second, "the app on version 1.1.0", func() error {
		image := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		if !strings.HasSuffix(image, ":1.1.0") {
			return fmt.Errorf("image %s", image)
		}
		return nil
	})
	if uid := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", "jsonpath={.metadata.uid}"); uid != appUID {
		t.Errorf("the app's Deployment was replaced (uid %s, was %s): a node that waits keeps its objects", uid, appUID)
	}
	newJobDone := timeOf(t, "job", "shop-migrate-1-1-0", "{.status.completionTime}")
	appChanged := timeOf(t, "deployment", "shop", `{.metadata.managedFields[?(@.manager=="stencil")].time}`)
	if appChanged.Before(newJobDone) {
		t.Errorf("the app changed at %s, before the new version's migration completed at %s", appChanged, newJobDone)
	}
	eventually(t, 60*time.Second, "the previous version's Job pruned", func() error {
		if jobs := mustKubectl(t, "-n", ns, "get", "jobs", "-o", "jsonpath={.items[*].metadata.name}"); jobs != "shop-migrate-1-1-0" {
			return fmt.Errorf("jobs: %s", jobs)
		}
		return nil
	})

	// The external input's change reaches the app.
	mustKubectl(t, "-n", ns, "patch", "configmap", "shop-settings", "--type=merge", "-p", `{"data":{"log-level":"debug"}}`)
	eventually(t, 60*time.Second, "the settings' change in the app", func() error {
		env := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", `jsonpath={.spec.template.spec.containers[0].env[?(@.name=="SETTINGS_LOG_LEVEL")].value}`)
		if env != "debug" {
			return fmt.Errorf("SETTINGS_LOG_LEVEL = %q", env)
		}
		return nil
	})
	password := mustKubectl(t, "-n", ns, "get", "secret", "shop-db", "-o", "jsonpath={.data.password}")

	// Deletion in reverse order: hold the app (the last stage) with a
	// finalizer; the database (an earlier stage) stays meanwhile.
	mustKubectl(t, "-n", ns, "patch", "deployment", "shop", "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.stencil.dev/hold"]}}`)
	mustKubectl(t, "-n", ns, "delete", "appstack", "shop", "--wait=false")
	eventually(t, 60*time.Second, "the app being deleted first", func() error {
		if ts := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
			return fmt.Errorf("the app is not being deleted yet")
		}
		return nil
	})
	for _, ref := range []string{"statefulset/shop-db", "secret/shop-db", "job/shop-migrate-1-1-0"} {
		if ts := mustKubectl(t, "-n", ns, "get", ref, "-o", "jsonpath={.metadata.deletionTimestamp}"); ts != "" {
			t.Errorf("%s is being deleted while the app, a later stage, is still there", ref)
		}
	}
	if p := mustKubectl(t, "-n", ns, "get", "secret", "shop-db", "-o", "jsonpath={.data.password}"); p != password || p == "" {
		t.Error("the generated password changed during the resource's life")
	}
	mustKubectl(t, "-n", ns, "patch", "deployment", "shop", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	eventually(t, 90*time.Second, "the AppStack and its objects gone", func() error {
		left := mustKubectl(t, "-n", ns, "get", "appstack,statefulset,job,deployment,secret,service", "-o", "name")
		if strings.TrimSpace(left) != "" {
			return fmt.Errorf("left: %s", left)
		}
		return nil
	})
}

// graphNamespace holds TestAppStackGraph's AppStack.
const graphNamespace = "graph"

// timeOf reads an RFC 3339 time from an object of graphNamespace with a
// jsonpath.
func timeOf(t *testing.T, kind, name, path string) time.Time {
	t.Helper()
	out := mustKubectl(t, "-n", graphNamespace, "get", kind, name, "-o", "jsonpath="+path)
	at, err := time.Parse(time.RFC3339, strings.Fields(out + " ")[0])
	if err != nil {
		t.Fatalf("%s %s %s: %q: %v", kind, name, path, out, err)
	}
	return at
}
