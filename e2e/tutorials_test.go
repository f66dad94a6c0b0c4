//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// tutorial is a seed tutorial's own steps on stencil's kind: its sample,
// applied as the tutorial writes it; a change made the way the tutorial
// makes it, through the kind's short name and the tutorial's field names
// (kubectl resolves the name to the kind's preferred version); and what
// the owned objects show before and after.
type tutorial struct {
	name, sample string
	// ref is the resource as the tutorial names it (kind/name).
	ref string
	// read is a jsonpath of the resource read through ref, and its value
	// before and after the change.
	read, before, after string
	// change is the kubectl command that makes the change (after the
	// namespace), and what it must not print.
	change []string
	// owned is "kind/name jsonpath" of an owned object, and its value
	// before and after the change.
	owned, ownedBefore, ownedAfter string
}

// tutorials are the seed documents' operators, as their tutorials use
// them. (Seed 004, the ReplicaSet decorator, is TestReplicaSetPodCount.)
var tutorials = []tutorial{
	{
		// Seeds 001 and 003, operator-sdk's Memcached: the sample at
		// v1alpha1, scaled through spec.size.
		name:   "memcached",
		sample: "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata:\n  name: memcached-sample\nspec:\n  size: 3\n",
		ref:    "memcached/memcached-sample", read: "{.spec.size}", before: "3", after: "5",
		change: []string{"patch", "memcached", "memcached-sample", "--type=merge", "-p", `{"spec":{"size":5}}`},
		owned:  "deployment/memcached-sample {.spec.replicas}", ownedBefore: "3", ownedAfter: "5",
	},
	{
		// Seed 000's FlightTicket.
		name:   "flightticket",
		sample: "apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata:\n  name: my-flight-ticket\nspec:\n  from: Mumbai\n  to: London\n  number: 2\n",
		ref:    "flightticket/my-flight-ticket", read: "{.spec.number}", before: "2", after: "3",
		change: []string{"patch", "ft", "my-flight-ticket", "--type=merge", "-p", `{"spec":{"number":3}}`}, // its short name
		owned:  "configmap/my-flight-ticket-booking {.data.number}", ownedBefore: "2", ownedAfter: "3",
	},
	{
		// Seed 002's MyWeb (its own node port: 30100 may be taken by
		// another test's).
		name:   "myweb",
		sample: "apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata:\n  name: myweb\nspec:\n  image: nginx\n  nodePortNumber: 30170\n  pageContentHtml: |\n    <html>\n      <body>\n        <h1>Hello, World!</h1>\n      </body>\n    </html>\n",
		ref:    "myweb/myweb", read: "{.spec.image}", before: "nginx", after: "nginx:1.27",
		change: []string{"patch", "web", "myweb", "--type=merge", "-p", `{"spec":{"image":"nginx:1.27"}}`}, // its short name
		owned:  "deployment/myweb {.spec.template.spec.containers[0].image}", ownedBefore: "nginx", ownedAfter: "nginx:1.27",
	},
	{
		// Seed 002's controller, sample-controller's Foo: its sample,
		// scaled through spec.replicas.
		name:   "foo",
		sample: "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: example-foo\nspec:\n  deploymentName: example-foo\n  replicas: 1\n",
		ref:    "foo/example-foo", read: "{.spec.replicas}", before: "1", after: "2",
		change: []string{"patch", "foo", "example-foo", "--type=merge", "-p", `{"spec":{"replicas":2}}`},
		owned:  "deployment/example-foo {.spec.replicas}", ownedBefore: "1", ownedAfter: "2",
	},
	{
		// kubebuilder's Guestbook (config/samples/guestbook.yaml).
		name:   "guestbook",
		sample: "apiVersion: webapp.my.domain/v1\nkind: Guestbook\nmetadata:\n  name: guestbook-sample\nspec:\n  size: 2\n  configMapName: guestbook-cfg\n  alias: Phone\n",
		ref:    "guestbook/guestbook-sample", read: "{.spec.size}", before: "2", after: "3",
		change: []string{"patch", "guestbook", "guestbook-sample", "--type=merge", "-p", `{"spec":{"size":3}}`},
		owned:  "deployment/guestbook-sample {.spec.replicas}", ownedBefore: "2", ownedAfter: "3",
	},
}

// TestTutorialCommands runs each seed tutorial's own commands on stencil's
// kinds: apply its sample, read it back, change it through the tutorial's
// field by the kind's short name (which kubectl resolves to the preferred
// version, Memcached's v1 for a v1alpha1 sample), read it back, see the
// owned object follow, delete it and see the owned object go. A kind that
// gained a version must not turn these commands into no-ops.
func TestTutorialCommands(t *testing.T) {
	for _, tt := range tutorials {
		t.Run(tt.name, func(t *testing.T) {
			ns := "tutorial-" + tt.name
			mustKubectl(t, "create", "namespace", ns)
			t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
			sample := writeFile(t, tt.sample)
			mustKubectl(t, "-n", ns, "apply", "-f", sample)
			ownedRef, ownedPath, _ := strings.Cut(tt.owned, " ")
			waitFor(t, ns, ownedRef, ownedPath, tt.ownedBefore)
			if got := mustKubectl(t, "-n", ns, "get", tt.ref, "-o", "jsonpath="+tt.read); got != tt.before {
				t.Errorf("kubectl get %s: %s = %q, want %q", tt.ref, tt.read, got, tt.before)
			}
			out := mustKubectl(t, append([]string{"-n", ns}, tt.change...)...)
			if strings.Contains(out, "no change") {
				t.Errorf("kubectl %s: %q: the tutorial's change changed nothing", strings.Join(tt.change, " "), strings.TrimSpace(out))
			}
			if got := mustKubectl(t, "-n", ns, "get", tt.ref, "-o", "jsonpath="+tt.read); got != tt.after {
				t.Errorf("after the change, %s = %q, want %q", tt.read, got, tt.after)
			}
			waitFor(t, ns, ownedRef, ownedPath, tt.ownedAfter)
			mustKubectl(t, "-n", ns, "delete", "-f", sample, "--wait=true", "--timeout=60s")
			eventually(t, 60*time.Second, ownedRef+" deleted with its resource", func() error {
				out, err := kubectl(t, "-n", ns, "get", ownedRef, "--ignore-not-found", "-o", "name")
				if err != nil {
					return err
				}
				if strings.TrimSpace(out) != "" {
					return fmt.Errorf("still there: %q", out)
				}
				return nil
			})
		})
	}
}

// TestTutorialEdit: kubectl edit of the tutorial's Memcached shows the
// tutorial's field, size, and an edit of it scales the Deployment.
func TestTutorialEdit(t *testing.T) {
	const ns = "tutorial-edit"
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "-n", ns, "apply", "-f", writeFile(t, tutorials[0].sample))
	waitFor(t, ns, "deployment/memcached-sample", "{.spec.replicas}", "3")
	t.Setenv("KUBE_EDITOR", `sed -i 's/^  size: 3$/  size: 2/'`)
	mustKubectl(t, "-n", ns, "edit", "memcached", "memcached-sample")
	if got := mustKubectl(t, "-n", ns, "get", "memcached", "memcached-sample", "-o", "jsonpath={.spec.size}"); got != "2" {
		t.Errorf("after kubectl edit, spec.size = %q, want 2: the editor saw no size: 3", got)
	}
	waitFor(t, ns, "deployment/memcached-sample", "{.spec.replicas}", "2")
}

// waitFor waits until ref's jsonpath in ns reads want.
func waitFor(t *testing.T, ns, ref, jsonpath, want string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%s %s = %s", ref, jsonpath, want), func() error {
		got, err := kubectl(t, "-n", ns, "get", ref, "-o", "jsonpath="+jsonpath)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s is %q", jsonpath, got)
		}
		return nil
	})
}
