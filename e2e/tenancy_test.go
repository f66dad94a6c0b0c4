//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTenantCannotSteerStencil installs stencil's admission policy
// (config/policy, part of `make deploy` and the chart) and acts as alice, a
// tenant who may edit everything in her namespace (the built-in edit role,
// and MyWebs). She cannot forge the keys that steer stencil: an owner label
// on her own objects or in a pod template (which would get them cached and
// wake another tenant's resource), a shard label or a prune-pending mark on
// her MyWeb. What she may do still works, and so does stencil: her MyWeb
// becomes Ready (stencil labels its objects, the cluster's controllers copy
// the labels to pods), she changes its spec and labels, and edits one of its
// objects (drift, which stencil reverts).
func TestTenantCannotSteerStencil(t *testing.T) {
	const ns = "tenant-a"
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "apply", "-k", "../config/policy")
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "-k", "../config/policy") })
	mustKubectl(t, "-n", ns, "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice")
	mustKubectl(t, "-n", ns, "create", "role", "mywebs", "--verb=*", "--resource=mywebs.operator.k8s-summit.org")
	mustKubectl(t, "-n", ns, "create", "rolebinding", "alice-mywebs", "--role=mywebs", "--user=alice")
	alice := func(args ...string) (string, error) {
		return kubectl(t, append([]string{"--as=alice", "-n", ns}, args...)...)
	}
	// deniedAsAlice applies manifest as alice, and returns why the API
	// server refused it ("" when it did not).
	deniedAsAlice := func(manifest string) string {
		if _, err := alice("apply", "-f", writeFile(t, manifest)); err != nil {
			return err.Error()
		}
		return ""
	}

	denied := []struct{ what, manifest string }{
		{"an owner label on her ConfigMap", `{apiVersion: v1, kind: ConfigMap, metadata: {name: forged, labels: {app.kubernetes.io/managed-by: stencil, stencil.dev/owner-uid: "0000"}}}`},
		{"an owner annotation on her ConfigMap", `{apiVersion: v1, kind: ConfigMap, metadata: {name: forged, annotations: {stencil.dev/owner: MyWeb.operator.k8s-summit.org/other/web}}}`},
		{"an owner label in a pod template", `{apiVersion: apps/v1, kind: Deployment, metadata: {name: forged}, spec: {replicas: 0, selector: {matchLabels: {app: forged}},
  template: {metadata: {labels: {app: forged, stencil.dev/owner-uid: "0000"}}, spec: {containers: [{name: c, image: nginx}]}}}}`},
		{"an owner label in a claim template", `{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: forged}, spec: {replicas: 0, serviceName: forged, selector: {matchLabels: {app: forged}},
  template: {metadata: {labels: {app: forged}}, spec: {containers: [{name: c, image: nginx}]}},
  volumeClaimTemplates: [{metadata: {name: data, labels: {stencil.dev/owner-uid: "0000"}}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]}}`},
		{"an owner label in a job template", `{apiVersion: batch/v1, kind: CronJob, metadata: {name: forged}, spec: {schedule: "@yearly",
  jobTemplate: {metadata: {labels: {stencil.dev/owner-uid: "0000"}}, spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: nginx}]}}}}}}`},
		{"an owner label in a job's ephemeral volume", `{apiVersion: batch/v1, kind: CronJob, metadata: {name: forged}, spec: {schedule: "@yearly",
  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: nginx}],
    volumes: [{name: data, ephemeral: {volumeClaimTemplate: {metadata: {labels: {stencil.dev/owner-uid: "0000"}}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}}]}}}}}}`},
		{"a shard label on her MyWeb", `{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: sharded, labels: {stencil.dev/shard: b}},
  spec: {image: nginx, nodePortNumber: 30310, pageContentHtml: hi}}`},
		{"a prune-pending mark on her MyWeb", `{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: marked, annotations: {stencil.dev/prune-pending: "true"}},
  spec: {image: nginx, nodePortNumber: 30311, pageContentHtml: hi}}`},
	}
	// The API server takes the policy up within a second or so.
	eventually(t, 30*time.Second, "the policy in force", func() error {
		if why := deniedAsAlice(denied[0].manifest); !strings.Contains(why, "only stencil sets") {
			_, _ = alice("delete", "configmap", "forged", "--ignore-not-found")
			return fmt.Errorf("not denied yet: %q", why)
		}
		return nil
	})
	for _, d := range denied {
		if why := deniedAsAlice(d.manifest); !strings.Contains(why, "only stencil sets") || !strings.Contains(why, "alice may not") {
			t.Errorf("%s: %q, want denied by stencil's policy", d.what, why)
		}
	}

	// What she may do.
	if why := deniedAsAlice(`{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: web}, spec: {image: nginx, nodePortNumber: 30312, pageContentHtml: hello}}`); why != "" {
		t.Fatalf("alice's MyWeb: %s", why)
	}
	mustKubectl(t, "-n", ns, "wait", "myweb/web", "--for=condition=Ready", "--timeout=90s")
	for _, args := range [][]string{
		{"label", "myweb", "web", "team=a"},
		{"patch", "myweb", "web", "--type=merge", "-p", `{"spec":{"pageContentHtml":"hello again"}}`},
		{"patch", "configmap", "web-html", "--type=merge", "-p", `{"data":{"index.html":"drifted"}}`},
		// A change of a pod template that carries stencil's labels, which it keeps.
		{"rollout", "restart", "deployment/web"},
	} {
		if out, err := alice(args...); err != nil {
			t.Errorf("alice: kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	eventually(t, 30*time.Second, "stencil sets alice's new page and reverts her edit of its ConfigMap", func() error {
		if html := mustKubectl(t, "-n", ns, "get", "configmap", "web-html", "-o", `jsonpath={.data.index\.html}`); html != "hello again" {
			return fmt.Errorf("index.html %q", html)
		}
		return nil
	})
	mustKubectl(t, "-n", ns, "wait", "myweb/web", "--for=condition=Ready", "--timeout=60s")
}

// TestTenantCannotSteerThroughSubresources: stencil's admission policy
// looks at subresources too. Mallory's Role grants everything in her
// namespace, subresources included. Her Pod, Service and Deployment are
// her own, but she cannot put stencil's control keys on them through
// their status subresources, which keep the labels and annotations a
// status write brings (deployments/status keeps only the annotations): each
// try is denied, and none of them carries the key. A Lease, which the
// policy leaves alone, still takes them.
func TestTenantCannotSteerThroughSubresources(t *testing.T) {
	const ns = "tenant-f"
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "apply", "-k", "../config/policy")
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "-k", "../config/policy") })
	mustKubectl(t, "apply", "-f", writeFile(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: everything, namespace: `+ns+`},
  rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]}`))
	mustKubectl(t, "-n", ns, "create", "rolebinding", "mallory-everything", "--role=everything", "--user=mallory")
	mallory := func(args ...string) (string, error) {
		return kubectl(t, append([]string{"--as=mallory", "-n", ns}, args...)...)
	}
	for _, manifest := range []string{
		`{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {containers: [{name: c, image: nginx}]}}`,
		`{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80}]}}`,
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 0, selector: {matchLabels: {app: web}},
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: nginx}]}}}}`,
	} {
		if out, err := mallory("apply", "-f", writeFile(t, manifest)); err != nil {
			t.Fatalf("mallory's own object: %v: %s", err, out)
		}
	}
	eventually(t, 30*time.Second, "the policy in force", func() error {
		_, err := mallory("apply", "-f", writeFile(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: forged, labels: {stencil.dev/owner-uid: "0000"}}}`))
		if err == nil || !strings.Contains(err.Error(), "only stencil sets") {
			_, _ = mallory("delete", "configmap", "forged", "--ignore-not-found")
			return fmt.Errorf("not denied yet: %w", err)
		}
		return nil
	})

	tries := []struct {
		what string
		// object is the object whose status subresource she patches.
		object string
		// patch is her merge patch of the status subresource.
		patch string
		// key is the JSONPath of the key she tries to set, which the
		// object must not carry afterwards.
		key string
	}{
		{"an owner label through pods/status", "pod/web", `{"metadata":{"labels":{"stencil.dev/owner-uid":"0000"}}}`, `{.metadata.labels.stencil\.dev/owner-uid}`},
		{"a shard label through pods/status", "pod/web", `{"metadata":{"labels":{"stencil.dev/shard":"b"}}}`, `{.metadata.labels.stencil\.dev/shard}`},
		{"an owner annotation through pods/status", "pod/web", `{"metadata":{"annotations":{"stencil.dev/owner":"MyWeb.operator.k8s-summit.org/other/web"}}}`, `{.metadata.annotations.stencil\.dev/owner}`},
		{"an owner label through services/status", "service/web", `{"metadata":{"labels":{"stencil.dev/owner-uid":"0000"}}}`, `{.metadata.labels.stencil\.dev/owner-uid}`},
		{"a decorator label through services/status", "service/web", `{"metadata":{"labels":{"stencil.dev/decorator":"namespace-defaults"}}}`, `{.metadata.labels.stencil\.dev/decorator}`},
		{"a prune-pending mark through services/status", "service/web", `{"metadata":{"annotations":{"stencil.dev/prune-pending":"true"}}}`, `{.metadata.annotations.stencil\.dev/prune-pending}`},
		{"an owner annotation through deployments/status", "deployment/web", `{"metadata":{"annotations":{"stencil.dev/owner":"MyWeb.operator.k8s-summit.org/other/web"}}}`, `{.metadata.annotations.stencil\.dev/owner}`},
		{"a claim's Lease through deployments/status", "deployment/web", `{"metadata":{"annotations":{"stencil.dev/claimed-under-lease":"stencil-b"}}}`, `{.metadata.annotations.stencil\.dev/claimed-under-lease}`},
	}
	for _, try := range tries {
		if out, err := mallory("patch", try.object, "--subresource=status", "--type=merge", "-p", try.patch); err == nil || !strings.Contains(err.Error(), "only stencil sets") || !strings.Contains(err.Error(), "mallory may not") {
			t.Errorf("%s: %v %s, want denied by stencil's policy", try.what, err, out)
		}
		if got := mustKubectl(t, "-n", ns, "get", try.object, "-o", "jsonpath="+try.key); got != "" {
			t.Errorf("%s: %s carries %q", try.what, try.object, got)
		}
	}

	// Leases are not looked at (written every few seconds, never stencil's).
	if out, err := mallory("apply", "-f", writeFile(t, `{apiVersion: coordination.k8s.io/v1, kind: Lease, metadata: {name: hers, labels: {stencil.dev/owner-uid: "0000"}}}`)); err != nil {
		t.Errorf("mallory's Lease: %v: %s", err, out)
	}
}

// TestTenantServiceAccountBoundsWhatIsMade runs stencil with
// --default-service-account=stencil-writer (config/impersonation lets it
// impersonate that name): it writes each resource's objects as the
// ServiceAccount "stencil-writer" of the resource's namespace. In
// tenant-b, it may manage ConfigMaps and Deployments but not Services, and a
// MyWeb renders all three: the MyWeb is Stalled with reason Forbidden,
// naming what writer may not do, and nothing is created. Once the
// namespace's admin grants Services, the MyWeb becomes Ready, its objects
// applied by writer, with stencil's control keys on them (its admission
// policy, installed, lets stencil's impersonated writes set them).
func TestTenantServiceAccountBoundsWhatIsMade(t *testing.T) {
	const ns = "tenant-b"
	writer := asTenantWriter(t, ns, "as-tenant", "configmaps,deployments.apps")

	mustKubectl(t, "apply", "-f", writeFile(t, `{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: web, namespace: `+ns+`}, spec: {image: nginx, nodePortNumber: 30320, pageContentHtml: hello}}`))
	eventually(t, 60*time.Second, "Stalled, reason Forbidden", func() error {
		stalled := mustKubectl(t, "-n", ns, "get", "myweb", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason} {.status.conditions[?(@.type=="Stalled")].message}`)
		if !strings.HasPrefix(stalled, "Forbidden ") || !strings.Contains(stalled, "ServiceAccount "+ns+"/"+writer) || !strings.Contains(stalled, "create services in namespace "+ns) {
			return fmt.Errorf("Stalled: %q", stalled)
		}
		return nil
	})
	if objs := mustKubectl(t, "-n", ns, "get", "configmaps,deployments,services", "-l", "app.kubernetes.io/managed-by=stencil", "-o", "name"); strings.TrimSpace(objs) != "" {
		t.Errorf("objects were created though the ServiceAccount may not create them all:\n%s", objs)
	}

	mustKubectl(t, "-n", ns, "create", "role", "writer-services", "--verb=get,list,watch,create,update,patch,delete", "--resource=services")
	mustKubectl(t, "-n", ns, "create", "rolebinding", "writer-services", "--role=writer-services", "--serviceaccount="+ns+":"+writer)
	mustKubectl(t, "-n", ns, "wait", "myweb/web", "--for=condition=Ready", "--timeout=90s")
	for _, obj := range []string{"configmap/web-html", "deployment/web", "service/web"} {
		if uid := mustKubectl(t, "-n", ns, "get", obj, "-o", `jsonpath={.metadata.labels.stencil\.dev/owner-uid}`); uid == "" {
			t.Errorf("%s has no owner label", obj)
		}
	}
}

// TestNamespaceScopedInstall runs stencil with --watch-namespaces=tenant-c
// as a ServiceAccount whose only rights on workloads come from a
// RoleBinding to stencil's ClusterRole in tenant-c (config/namespaced does
// the same): its MyWeb in tenant-c becomes Ready, and one in tenant-d is
// left alone, not even given a status.
func TestNamespaceScopedInstall(t *testing.T) {
	const mine, other, sa = "tenant-c", "tenant-d", "stencil-namespaced"
	for _, ns := range []string{mine, other} {
		mustKubectl(t, "create", "namespace", ns)
		t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	}
	mustKubectl(t, "-n", "stencil-system", "create", "serviceaccount", sa)
	mustKubectl(t, "-n", "stencil-system", "create", "rolebinding", sa, "--role=stencil-leader-election", "--serviceaccount=stencil-system:"+sa)
	mustKubectl(t, "-n", mine, "create", "rolebinding", "stencil", "--clusterrole=stencil-manager", "--serviceaccount=stencil-system:"+sa)
	// Cluster-wide, as config/namespaced/control_keys.yaml: set on
	// controlkeys.stencil.dev, which its admission policy asks of who
	// writes stencil's objects.
	mustKubectl(t, "apply", "-f", writeFile(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: `+sa+`}, rules: [{apiGroups: [stencil.dev], resources: [controlkeys], verbs: [set]}]}`))
	mustKubectl(t, "create", "clusterrolebinding", sa, "--clusterrole="+sa, "--serviceaccount=stencil-system:"+sa)
	t.Cleanup(func() {
		_, _ = kubectl(t, "-n", "stencil-system", "delete", "serviceaccount,rolebinding", sa)
		_, _ = kubectl(t, "delete", "clusterrole,clusterrolebinding", sa)
	})
	kubeconfig := tokenKubeconfig(t, sa)

	current.stop()
	op, err := launch("namespaced", filepath.Join(binDir, "stencil"), kubeconfig, "--watch-namespaces="+mine)
	if err != nil {
		t.Fatal(err)
	}
	current = op
	t.Cleanup(func() { restoreFirstBuild(t) })

	for i, ns := range []string{mine, other} {
		mustKubectl(t, "apply", "-f", writeFile(t, fmt.Sprintf(`{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: web, namespace: %s}, spec: {image: nginx, nodePortNumber: %d, pageContentHtml: hello}}`, ns, 30330+i)))
	}
	if _, err := kubectl(t, "-n", mine, "wait", "myweb/web", "--for=condition=Ready", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n--- the namespace-scoped stencil's log:\n%s", err, op.logTail())
	}
	time.Sleep(3 * time.Second)
	if status := mustKubectl(t, "-n", other, "get", "myweb", "web", "-o", "jsonpath={.status}"); status != "" {
		t.Errorf("the MyWeb outside the watched namespace has a status: %s", status)
	}
	if objs := mustKubectl(t, "-n", other, "get", "configmaps,deployments,services", "-l", "app.kubernetes.io/managed-by=stencil", "-o", "name"); strings.TrimSpace(objs) != "" {
		t.Errorf("objects were made outside the watched namespace:\n%s", objs)
	}
	if log := op.logTail(); strings.Contains(log, "forbidden") {
		t.Errorf("the namespace-scoped stencil was refused something:\n%s", log)
	}
}

// TestTenantCannotReadThroughInputs: with --default-service-account, a
// graph kind's inputs are read as the resource's ServiceAccount. A tenant
// whose AppStack names a ConfigMap that ServiceAccount may not read gets
// Stalled, reason Forbidden, and the ConfigMap's data reaches no object;
// once the namespace's admin grants the read, the AppStack becomes Ready
// with it.
func TestTenantCannotReadThroughInputs(t *testing.T) {
	const ns = "tenant-e"
	writer := asTenantWriter(t, ns, "as-tenant-inputs", "secrets,services,statefulsets.apps,jobs.batch,deployments.apps")
	mustKubectl(t, "-n", ns, "create", "configmap", "payroll", "--from-literal=salary=100")

	mustKubectl(t, "apply", "-f", writeFile(t, `{apiVersion: stacks.stencil.dev/v1alpha1, kind: AppStack, metadata: {name: shop, namespace: `+ns+`}, spec: {version: "1.0.0", settings: payroll}}`))
	eventually(t, 120*time.Second, "Stalled, reason Forbidden", func() error {
		stalled := mustKubectl(t, "-n", ns, "get", "appstack", "shop", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason} {.status.conditions[?(@.type=="Stalled")].message}`)
		if !strings.HasPrefix(stalled, "Forbidden ") || !strings.Contains(stalled, "configmaps") {
			return fmt.Errorf("Stalled: %q", stalled)
		}
		return nil
	})
	if env, _ := kubectl(t, "-n", ns, "get", "deployments", "-o", "jsonpath={.items[*].spec.template.spec.containers[*].env[*].value}"); strings.Contains(env, "100") {
		t.Fatalf("the ConfigMap's data reached a Deployment: %s", env)
	}
	mustKubectl(t, "-n", ns, "create", "role", "writer-configmaps", "--verb=get", "--resource=configmaps")
	mustKubectl(t, "-n", ns, "create", "rolebinding", "writer-configmaps", "--role=writer-configmaps", "--serviceaccount="+ns+":"+writer)
	// No event tells of a RoleBinding (stencil looks again within 30 s); a
	// change of the AppStack brings it back at once.
	mustKubectl(t, "-n", ns, "annotate", "appstack", "shop", "e2e.stencil.dev/granted=configmaps")
	mustKubectl(t, "-n", ns, "wait", "appstack/shop", "--for=condition=Ready", "--timeout=90s")
	if env := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", `jsonpath={.spec.template.spec.containers[0].env[?(@.name=="SETTINGS_SALARY")].value}`); env != "100" {
		t.Errorf("SETTINGS_SALARY = %q once the read is granted, want 100", env)
	}
	mustKubectl(t, "-n", ns, "delete", "appstack", "shop", "--timeout=60s")
}

// asTenantWriter creates namespace ns, with stencil's admission policy and
// impersonation installed, and in it the ServiceAccount "stencil-writer",
// which may manage resources (kubectl create role's --resource); it then
// runs stencil (as name) writing as that ServiceAccount
// (--default-service-account), until the test ends. It returns the
// ServiceAccount's name.
func asTenantWriter(t *testing.T, ns, name, resources string) string {
	t.Helper()
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	for _, dir := range []string{"../config/policy", "../config/impersonation"} {
		mustKubectl(t, "apply", "-k", dir)
		t.Cleanup(func() { _, _ = kubectl(t, "delete", "-k", dir) })
	}
	const writer = "stencil-writer"
	mustKubectl(t, "-n", ns, "create", "serviceaccount", writer)
	mustKubectl(t, "-n", ns, "create", "role", "writer", "--verb=get,list,watch,create,update,patch,delete", "--resource="+resources)
	mustKubectl(t, "-n", ns, "create", "rolebinding", "writer", "--role=writer", "--serviceaccount="+ns+":"+writer)
	current.stop()
	op, err := startBinary(name, filepath.Join(binDir, "stencil"), "--default-service-account="+writer)
	if err != nil {
		t.Fatal(err)
	}
	current = op
	t.Cleanup(func() { restoreFirstBuild(t) })
	return writer
}
