//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/templates"
)

// The fault suite: the control plane misbehaves while stencil converges,
// and afterwards every resource is Ready for its generation with exactly
// its rendered objects, and no status says what is not so. They run last
// (file order): they restart the control plane and stop operators.

// TestAPIServerRestart kills kube-apiserver while stencil converges 100
// FlightTickets and starts it again.
func TestAPIServerRestart(t *testing.T) {
	faultCase(t, "fault-apiserver", func() {
		if err := cluster.Restart(t.Context(), "kube-apiserver", 2*time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// TestEtcdRestart kills etcd while stencil converges 100 FlightTickets and
// starts it again.
func TestEtcdRestart(t *testing.T) {
	faultCase(t, "fault-etcd", func() {
		if err := cluster.Restart(t.Context(), "etcd", 2*time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// faultCase creates 100 FlightTickets in namespace ns and, once stencil has
// made a quarter of them Ready and while it works on the rest, runs fault;
// then it waits until every one is Ready for its generation and checks
// their objects. A nil fault is one in force from the start (a throttle).
// An operator that exited meanwhile is started again (replaceExited). The
// namespace is deleted when the test ends.
func faultCase(t *testing.T, ns string, fault func()) {
	t.Helper()
	const n = 100
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	var crs strings.Builder
	for i := range n {
		fmt.Fprintf(&crs, "---\napiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: ft-%d, namespace: %s}\nspec: {from: Oslo, to: Rome, number: %d}\n", i, ns, i%10+1)
	}
	file := writeFile(t, crs.String())
	created := make(chan error, 1)
	began := time.Now()
	go func() { _, err := kubectl(t, "apply", "-f", file); created <- err }()
	if fault == nil {
		fault = func() {}
	} else {
		ready := waitForReady(t, ns, n/4)
		if ready == n {
			t.Fatalf("all %d FlightTickets were Ready before the fault: it did not hit a convergence", n)
		}
		t.Logf("%s: %d of %d FlightTickets Ready when the fault began", ns, ready, n)
		began = time.Now()
	}
	fault()
	ended := time.Now()
	if err := <-created; err != nil {
		// kubectl may have met the fault; what it did not create is created now.
		mustKubectl(t, "apply", "-f", file)
	}
	eventually(t, 3*time.Minute, "every FlightTicket Ready for its generation", func() error {
		replaceExited(t, ns)
		return allReady(t, ns, n)
	})
	t.Logf("%s: the fault took %s; every FlightTicket Ready %s after it ended", ns, ended.Sub(began).Round(time.Millisecond), time.Since(ended).Round(time.Millisecond))
	checkRendered(t, ns, n)
}

// replaceExited starts another operator when the current one exited (a
// leader that could not renew its Lease exits, as it should), as its
// Deployment would.
func replaceExited(t *testing.T, ns string) {
	t.Helper()
	select {
	case <-current.exited:
		t.Logf("the operator %s exited (%s); starting another", current.name, strings.TrimSpace(lastLine(current.logTail())))
		// A name of its own: its log file must not replace another's.
		name := "after-" + ns
		for i := 2; slices.ContainsFunc(running, func(o *operator) bool { return o.name == name }); i++ {
			name = fmt.Sprintf("after-%s-%d", ns, i)
		}
		op, err := startOperator(name)
		if err != nil {
			t.Fatal(err)
		}
		current = op
	default:
	}
}

// waitForReady polls (every 10 ms, with its own client: kubectl would be too
// slow to catch a convergence midway) until at least want FlightTickets in
// ns are Ready, and returns how many are. An operator that exited meanwhile
// (a leader that could not renew its Lease on a loaded machine) is
// replaced, as in faultCase: else nothing would reconcile, in this test and
// the next.
func waitForReady(t *testing.T, ns string, want int) int {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 1000 // client-go's default (5 per second) would be too slow
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resource := schema.GroupVersionResource{Group: "flights.com", Version: "v1", Resource: "flighttickets"}
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := client.Resource(resource).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		ready := 0
		if err == nil {
			for _, ft := range list.Items {
				conditions, _, _ := unstructured.NestedSlice(ft.Object, "status", "conditions")
				for _, c := range conditions {
					if c, ok := c.(map[string]any); ok && c["type"] == "Ready" && c["status"] == "True" {
						ready++
					}
				}
			}
		}
		if ready >= want {
			return ready
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d FlightTickets Ready in %s after a minute, want %d (%v)", ready, ns, want, err)
		}
		replaceExited(t, ns)
		time.Sleep(10 * time.Millisecond)
	}
}

// flightTicket is the part of a FlightTicket the fault checks read.
type flightTicket struct {
	Metadata struct {
		Name, UID  string
		Generation int64
	}
	Spec   struct{ To string }
	Status struct {
		ObservedGeneration int64
		Conditions         []struct{ Type, Status, Reason string }
		Inventory          []struct{ Kind, Name string }
	}
}

func flightTickets(t *testing.T, ns string) []flightTicket {
	t.Helper()
	var list struct{ Items []flightTicket }
	if err := json.Unmarshal([]byte(mustKubectl(t, "-n", ns, "get", "flighttickets", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// allReady: n FlightTickets, each Ready=True for its generation.
func allReady(t *testing.T, ns string, n int) error {
	t.Helper()
	fts := flightTickets(t, ns)
	if len(fts) != n {
		return fmt.Errorf("%d FlightTickets, want %d", len(fts), n)
	}
	for _, ft := range fts {
		ready := false
		for _, c := range ft.Status.Conditions {
			ready = ready || c.Type == "Ready" && c.Status == "True"
		}
		if !ready || ft.Status.ObservedGeneration != ft.Metadata.Generation {
			return fmt.Errorf("%s: Ready %v, observedGeneration %d of %d", ft.Metadata.Name, ready, ft.Status.ObservedGeneration, ft.Metadata.Generation)
		}
	}
	return nil
}

// checkRendered: exactly one ConfigMap per FlightTicket, its own (owner
// label), with the spec's destination; none without a FlightTicket; each
// inventory names exactly its ConfigMap.
func checkRendered(t *testing.T, ns string, n int) {
	t.Helper()
	var cms struct {
		Items []struct {
			Metadata struct {
				Name   string
				Labels map[string]string
			}
			Data map[string]string
		}
	}
	out := mustKubectl(t, "-n", ns, "get", "configmaps", "-l", "app.kubernetes.io/managed-by=stencil", "-o", "json")
	if err := json.Unmarshal([]byte(out), &cms); err != nil {
		t.Fatal(err)
	}
	byOwner := map[string][]string{}
	booking := map[string]string{}
	for _, cm := range cms.Items {
		uid := cm.Metadata.Labels["stencil.dev/owner-uid"]
		byOwner[uid] = append(byOwner[uid], cm.Metadata.Name)
		booking[cm.Metadata.Name] = strings.Join(mapValues(cm.Data), " ")
	}
	fts := flightTickets(t, ns)
	if len(cms.Items) != len(fts) || len(fts) != n {
		t.Errorf("%d ConfigMaps for %d FlightTickets (want %d each)", len(cms.Items), len(fts), n)
	}
	for _, ft := range fts {
		want := ft.Metadata.Name + "-booking"
		if got := byOwner[ft.Metadata.UID]; len(got) != 1 || got[0] != want {
			t.Errorf("%s owns ConfigMaps %v, want [%s]", ft.Metadata.Name, got, want)
		}
		if !strings.Contains(booking[want], ft.Spec.To) {
			t.Errorf("%s: ConfigMap %s says %q, not its destination %s", ft.Metadata.Name, want, booking[want], ft.Spec.To)
		}
		if inv := ft.Status.Inventory; len(inv) != 1 || inv[0].Kind != "ConfigMap" || inv[0].Name != want {
			t.Errorf("%s: inventory %v, want its ConfigMap %s", ft.Metadata.Name, inv, want)
		}
		delete(byOwner, ft.Metadata.UID)
	}
	if len(byOwner) > 0 {
		t.Errorf("ConfigMaps of no FlightTicket: %v", byOwner)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// operatorUser is the user the e2e operators run as (startOperator).
const operatorUser = "system:serviceaccount:stencil-system:stencil"

// throttle is an API Priority and Fairness configuration that gives the
// operators' ServiceAccounts the smallest share there is (one of about 250:
// 3 requests at a time on this API server), with no queue and no borrowing,
// so that whatever does not fit is refused at once with 429. Their Lease
// requests keep the leader-election level, as a cluster's own
// configuration does for its controllers.
const throttle = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: stencil-throttled}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: stencil-throttled}
spec:
  priorityLevelConfiguration: {name: stencil-throttled}
  matchingPrecedence: 1000
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - {kind: ServiceAccount, serviceAccount: {namespace: stencil-system, name: stencil}}
    - {kind: ServiceAccount, serviceAccount: {namespace: stencil-system, name: stencil-standby}}
    resourceRules:
    - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}
    nonResourceRules:
    - {verbs: ["*"], nonResourceURLs: ["*"]}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: stencil-leases}
spec:
  priorityLevelConfiguration: {name: leader-election}
  matchingPrecedence: 900
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - {kind: ServiceAccount, serviceAccount: {namespace: stencil-system, name: stencil}}
    - {kind: ServiceAccount, serviceAccount: {namespace: stencil-system, name: stencil-standby}}
    resourceRules:
    - {verbs: ["*"], apiGroups: [coordination.k8s.io], resources: [leases], namespaces: ["*"]}
`

// TestThrottled converges 100 FlightTickets while API Priority and
// Fairness refuses the operator's requests beyond three at a time (429),
// and the operator starts (a rollout, a failover) at the same moment: its
// caches' first lists, its leader election and its first reconciles come
// in one burst.
func TestThrottled(t *testing.T) {
	config := writeFile(t, throttle)
	mustKubectl(t, "apply", "-f", config)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "-f", config) })
	eventually(t, 30*time.Second, "the FlowSchemas in force", func() error {
		out, err := kubectl(t, "get", "flowschema", "stencil-throttled", "stencil-leases", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Dangling")].status}{" "}{end}`)
		if err != nil || strings.TrimSpace(out) != "False False" {
			return fmt.Errorf("Dangling: %q: %w", out, err)
		}
		return nil
	})
	before := rejected(t)
	current.stop()
	op, err := startOperator("throttled")
	if err != nil {
		t.Fatal(err)
	}
	current = op
	faultCase(t, "fault-throttled", nil)
	refused := rejected(t) - before
	t.Logf("the API server refused %d of the operator's requests with 429", refused)
	for line := range strings.SplitSeq(mustKubectl(t, "get", "--raw", "/metrics"), "\n") {
		if strings.Contains(line, `priority_level="stencil-throttled"`) && (strings.HasPrefix(line, "apiserver_flowcontrol_nominal_limit_seats") || strings.HasPrefix(line, "apiserver_flowcontrol_dispatched_requests_total") || strings.HasPrefix(line, "apiserver_flowcontrol_current_limit_seats")) {
			t.Log(line)
		}
	}
	if refused == 0 {
		t.Errorf("the throttle refused nothing: this case did not test throttling")
	}
}

// rejected is how many requests API Priority and Fairness refused at the
// level stencil-throttled (the API server's own count).
func rejected(t *testing.T) int {
	t.Helper()
	out := mustKubectl(t, "get", "--raw", "/metrics")
	total := 0.0
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "apiserver_flowcontrol_rejected_requests_total{") || !strings.Contains(line, `priority_level="stencil-throttled"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
			t.Fatalf("reading %q: %v", line, err)
		}
		total += v
	}
	return int(total)
}

// TestWatchExpiry converges 100 FlightTickets while every watch the
// operator holds expires. The API server runs with its watch cache off, so
// that a watch is served from etcd's history; the operator reaches it
// through a proxy. Midway, etcd's history is compacted to its current
// revision and the proxy cuts every connection: each informer resumes its
// watch from the resourceVersion it had, is told 410 Gone (etcd no longer
// has what follows it), and must list again. (An API server restart would
// not show this: client-go lists again after any failed reconnect.)
func TestWatchExpiry(t *testing.T) {
	if err := cluster.Restart(t.Context(), "kube-apiserver", 0, "--watch-cache=false"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Last (cleanups run in reverse): leave the suite as it was, the
		// API server with its watch cache and an operator that reaches it
		// directly.
		if err := cluster.Restart(context.Background(), "kube-apiserver", 0); err != nil {
			t.Errorf("restoring the API server's flags: %v", err)
		}
		select {
		case <-current.exited:
			op, err := startOperator("after-watch-expiry")
			if err != nil {
				t.Errorf("starting an operator after the proxied one: %v", err)
				return
			}
			current = op
		default:
		}
	})
	server, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	px, err := startProxy(server.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.close)
	cfg := rest.CopyConfig(saConfig)
	cfg.Host = "https://" + px.addr()
	kubeconfig := filepath.Join(cluster.Dir, "stencil-proxied.kubeconfig")
	if err := localcluster.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	current.stop()
	started := time.Now()
	op, err := startAs("proxied", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current = op
	t.Cleanup(current.stop) // before the proxy closes
	// client-go lists again, rather than resuming, a watch that ends less
	// than a second after it began with no event in it ("very short
	// watch"): the new operator's watches must be older than that when the
	// proxy cuts them.
	eventually(t, 30*time.Second, "the proxied operator watches FlightTickets", func() error {
		for _, e := range auditEvents(t, operatorUser, started) {
			if e.Verb == "watch" && e.ObjectRef.Resource == "flighttickets" {
				return nil
			}
		}
		return fmt.Errorf("no watch yet")
	})
	// Every controller started its workers: its informers' first lists,
	// streamed, are done. A cut before that only restarts a streaming list
	// from where it began (no 410 Gone, nothing resumed), which a loaded
	// machine made likely.
	eventually(t, time.Minute, "the proxied operator's controllers have synced their caches", func() error {
		if n := strings.Count(readLog(t, op), `"msg":"Starting workers"`); n < len(templates.Kinds) {
			return fmt.Errorf("%d of %d controllers started their workers", n, len(templates.Kinds))
		}
		return nil
	})
	// And every watch it holds is older than client-go's second: the audit
	// log shows no watch begun for 2 s.
	waitAuditQuiet(t, operatorUser, 2*time.Second, time.Minute, func(e auditEvent) bool { return e.Verb == "watch" })
	var resumed time.Time
	var compacted int64
	faultCase(t, "fault-watch-expiry", func() {
		var err error
		if compacted, err = cluster.CompactEtcd(t.Context()); err != nil {
			t.Fatal(err)
		}
		resumed = time.Now()
		t.Logf("etcd compacted at revision %d; the proxy cut %d connections", compacted, px.cut())
	})
	if op != current {
		t.Fatalf("the operator exited; a new process lists anyway, so its requests say nothing about expired watches")
	}
	// A watch resumed from before the compacted revision is necessarily
	// answered 410 Gone; the informer must then list again: a list, or a
	// watch that starts with the initial events (client-go's streaming
	// list).
	var expired, relisted []string
	t.Cleanup(func() {
		if t.Failed() { // what the informers did after the cut
			t.Logf("the operator's lists and watches after the cut (a watch's HTTP code is 200 even when it expired: the 410 travels inside its stream):")
			for _, e := range auditEvents(t, operatorUser, resumed) {
				if e.Verb == "watch" || e.Verb == "list" {
					t.Logf("%s %s %s (%d)", e.Received.Format("15:04:05.000"), e.Verb, e.RequestURI, e.Response.Code)
				}
			}
		}
	})
	eventually(t, time.Minute, "every informer whose watch expired lists again", func() error {
		expired, relisted = expiredAndRelisted(t, resumed, compacted)
		if len(expired) == 0 || len(relisted) < len(expired) {
			return fmt.Errorf("watches resumed from before revision %d: %v; listed again since: %v", compacted, expired, relisted)
		}
		return nil
	})
	t.Logf("watches resumed from before revision %d (410 Gone): %v; each listed again within %s of the cut",
		compacted, expired, time.Since(resumed).Round(time.Second))
	checkRendered(t, "fault-watch-expiry", 100)
}

// expiredAndRelisted reads the operator's requests since from the audit
// log: the resources whose watch resumed from a resourceVersion etcd has
// compacted away (before revision compacted), and those among them listed
// after that watch.
func expiredAndRelisted(t *testing.T, since time.Time, compacted int64) (expired, relisted []string) {
	t.Helper()
	expiredAt := map[string]time.Time{}
	for _, e := range auditEvents(t, operatorUser, since) {
		uri, err := url.Parse(e.RequestURI)
		if err != nil {
			t.Fatal(err)
		}
		q, resource := uri.Query(), e.ObjectRef.Resource
		streamingList := q.Get("sendInitialEvents") == "true"
		if e.Verb == "watch" && !streamingList {
			rv, err := strconv.ParseInt(q.Get("resourceVersion"), 10, 64)
			if _, seen := expiredAt[resource]; err == nil && rv < compacted-1 && !seen {
				expiredAt[resource] = e.Received
				expired = append(expired, resource)
			}
			continue
		}
		if at, ok := expiredAt[resource]; ok && (e.Verb == "list" || streamingList) && !e.Received.Before(at) && !slices.Contains(relisted, resource) {
			relisted = append(relisted, resource)
		}
	}
	return expired, relisted
}

// TestPausedLeaderWritesNothing stops the leader (SIGSTOP) past its Lease;
// the standby takes over and changes things (a FlightTicket edited, one
// deleted); the old leader is woken (SIGCONT). Its writes after it wakes
// are counted in the API server's audit log (the standby runs as another
// ServiceAccount): the fence refuses them all, so none changes anything,
// and it exits on finding the Lease lost.
func TestPausedLeaderWritesNothing(t *testing.T) {
	const ns, n = "paused-leader", 10
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	var crs strings.Builder
	for i := range n {
		fmt.Fprintf(&crs, "---\napiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: ft-%d, namespace: %s}\nspec: {from: Oslo, to: Rome, number: %d}\n", i, ns, i%10+1)
	}
	mustKubectl(t, "apply", "-f", writeFile(t, crs.String()))
	eventually(t, 60*time.Second, "every FlightTicket Ready", func() error {
		replaceExited(t, ns) // the test before restarted the API server
		return allReady(t, ns, n)
	})

	standby, err := startStandby(t)
	if err != nil {
		t.Fatal(err)
	}
	paused, before := current, leader()
	if err := syscall.Kill(paused.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Runs before the standby's cleanup, which stops it and so releases
	// the Lease: woken, the old leader could take the Lease back and hold
	// it after the test (it is the default shard's Lease too).
	t.Cleanup(func() {
		select {
		case <-paused.exited:
		default:
			paused.kill() // SIGKILL ends a stopped process too
		}
	})
	stopped := time.Now()
	eventually(t, 60*time.Second, "the standby holds the Lease", func() error {
		if now := leader(); now == before || now == "" {
			return fmt.Errorf("holder still %q", now)
		}
		return nil
	})
	current = standby
	t.Logf("the standby took the Lease %s after the leader stopped", time.Since(stopped).Round(time.Millisecond))

	// The new leader changes things the old one's cache does not know.
	mustKubectl(t, "-n", ns, "patch", "flightticket", "ft-0", "--type=merge", "-p", `{"spec":{"to":"Paris"}}`)
	mustKubectl(t, "-n", ns, "delete", "flightticket", "ft-1", "--wait=true")
	eventually(t, 30*time.Second, "the new leader applied the change", func() error {
		if err := allReady(t, ns, n-1); err != nil {
			return err
		}
		if out, _ := kubectl(t, "-n", ns, "get", "configmap", "ft-0-booking", "-o", "yaml"); !strings.Contains(out, "Paris") {
			return fmt.Errorf("ft-0-booking does not say Paris yet")
		}
		return nil
	})
	// ft-1-booking goes through its ownerReference, so kube-controller-
	// manager's garbage collector deletes it, not stencil. After the API
	// server restarts of the tests before, the collector may pause its
	// workers for its discovery period (30 s) while it resyncs.
	eventually(t, 90*time.Second, "ft-1-booking garbage-collected", func() error {
		if _, err := kubectl(t, "-n", ns, "get", "configmap", "ft-1-booking"); err == nil {
			return fmt.Errorf("ft-1-booking is still there")
		}
		return nil
	})
	// The old leader's backstop requeues (30 s after its last applies) are
	// due; it wakes with a cache of before.
	if wait := 32*time.Second - time.Since(stopped); wait > 0 {
		time.Sleep(wait)
	}
	woke := time.Now()
	if err := syscall.Kill(paused.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-paused.exited:
		t.Logf("the old leader exited %s after it woke: %s", time.Since(woke).Round(time.Millisecond), strings.TrimSpace(lastLine(paused.logTail())))
	case <-time.After(30 * time.Second):
		t.Errorf("the old leader still runs 30 s after it woke")
	}
	writes, all := countWrites(t, operatorUser, woke)
	t.Logf("the old leader after it woke: %d requests, %d writes other than to its Lease: %v", all, len(writes), writes)
	if len(writes) > 0 {
		t.Errorf("the old leader wrote after it woke: %v", writes)
	}
	fenced := strings.Count(mustReadFile(t, paused.logPath), "refused a write")
	t.Logf("the fence refused %d writes in its log", fenced)
	if fenced == 0 {
		t.Errorf("the old leader tried no write after it woke: this case did not test the fence")
	}
	checkRendered(t, ns, n-1)
	if out := mustKubectl(t, "-n", ns, "get", "configmap", "ft-0-booking", "-o", "yaml"); !strings.Contains(out, "Paris") {
		t.Errorf("ft-0-booking lost the new leader's change:\n%s", out)
	}
}

// startStandby runs a second operator as the ServiceAccount stencil-standby,
// bound to the same roles, so that the audit log tells its requests from
// the leader's.
func startStandby(t *testing.T) (*operator, error) {
	t.Helper()
	kubeconfig := serviceAccountKubeconfig(t, "stencil-standby")
	t.Cleanup(func() {
		// Leave the suite as it was: an operator running as stencil.
		if current.name == "standby" {
			current.stop()
			if op, err := startOperator("after-standby"); err == nil {
				current = op
			} else {
				t.Errorf("starting an operator after the standby: %v", err)
			}
		}
	})
	return startAs("standby", kubeconfig)
}

// serviceAccountKubeconfig creates the ServiceAccount stencil-system/sa,
// bound to the operator's roles, and returns a kubeconfig with a token for
// it; the test's cleanup deletes them.
func serviceAccountKubeconfig(t *testing.T, sa string) string {
	t.Helper()
	mustKubectl(t, "-n", "stencil-system", "create", "serviceaccount", sa)
	mustKubectl(t, "create", "clusterrolebinding", sa, "--clusterrole=stencil-manager", "--serviceaccount=stencil-system:"+sa)
	mustKubectl(t, "-n", "stencil-system", "create", "rolebinding", sa, "--role=stencil-leader-election", "--serviceaccount=stencil-system:"+sa)
	t.Cleanup(func() {
		_, _ = kubectl(t, "-n", "stencil-system", "delete", "serviceaccount,rolebinding", sa)
		_, _ = kubectl(t, "delete", "clusterrolebinding", sa)
	})
	return tokenKubeconfig(t, sa)
}

// tokenKubeconfig is a kubeconfig with a token for the ServiceAccount
// stencil-system/sa.
func tokenKubeconfig(t *testing.T, sa string) string {
	t.Helper()
	token := strings.TrimSpace(mustKubectl(t, "-n", "stencil-system", "create", "token", sa, "--duration=1h"))
	kubeconfig := filepath.Join(cluster.Dir, sa+".kubeconfig")
	cfg := *cluster.Config
	cfg.BearerToken, cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = token, nil, nil, "", ""
	if err := localcluster.WriteKubeconfig(&cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// auditEvent is the part of an audit log entry the fault tests read.
type auditEvent struct {
	Stage, Verb string
	RequestURI  string `json:"requestURI"`
	User        struct{ Username string }
	ObjectRef   struct{ Resource, Namespace, Name string }
	Response    struct{ Code int } `json:"responseStatus"`
	Received    time.Time          `json:"requestReceivedTimestamp"`
}

// auditEvents reads the audit log: the requests user sent from since on.
func auditEvents(t *testing.T, user string, since time.Time) []auditEvent {
	t.Helper()
	all, _ := auditFrom(t, 0)
	var events []auditEvent
	for _, e := range all {
		if e.User.Username == user && !e.Received.Before(since) {
			events = append(events, e)
		}
	}
	return events
}

// auditFrom reads the audit log from byte offset on: its entries that
// record a request done, and the offset after the last complete line (the
// API server may be writing the next).
func auditFrom(t *testing.T, offset int64) ([]auditEvent, int64) {
	t.Helper()
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var events []auditEvent
	for line := range bytes.Lines(data) {
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		// A watch is logged when its response starts (it completes only when
		// it ends); every other request when it completes.
		if e.Stage == "ResponseComplete" && e.Verb != "watch" || e.Stage == "ResponseStarted" && e.Verb == "watch" {
			events = append(events, e)
		}
	}
	return events, offset + int64(len(data))
}

// waitAuditQuiet waits until, as the audit log shows, user has sent no
// request that counts for quiet: it has ended what it was doing, however
// long a loaded machine takes. It fails the test once within has passed
// with user still sending.
func waitAuditQuiet(t *testing.T, user string, quiet, within time.Duration, counts func(auditEvent) bool) {
	t.Helper()
	_, offset := auditFrom(t, 0)
	deadline := time.Now().Add(within)
	var sent []auditEvent
	for last := time.Now(); time.Since(last) < quiet; {
		if time.Now().After(deadline) {
			t.Fatalf("%s still sends requests after %s: %d of them, the last %+v", user, within, len(sent), sent[max(len(sent)-1, 0):])
		}
		time.Sleep(200 * time.Millisecond)
		var events []auditEvent
		events, offset = auditFrom(t, offset)
		for _, e := range events {
			if e.User.Username == user && counts(e) {
				sent, last = append(sent, e), time.Now()
			}
		}
	}
}

// countWrites: the requests user sent from since on, and its writes among
// them but for the Lease writes the API server refused.
func countWrites(t *testing.T, user string, since time.Time) ([]string, int) {
	t.Helper()
	events := auditEvents(t, user, since)
	var writes []string
	for _, e := range events {
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			// A write of a Lease that succeeded after the takeover would
			// take the Lease back or release the new leader's.
			if e.ObjectRef.Resource != "leases" || e.Response.Code < 300 {
				writes = append(writes, fmt.Sprintf("%s %s %s/%s (%d)", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.Response.Code))
			}
		}
	}
	return writes, len(events)
}
