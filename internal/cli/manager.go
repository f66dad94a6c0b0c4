package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/internal/operator/metricsauth"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/reconciler/decorator"
	"github.com/stencil-operator/stencil/reconciler/fence"
	"github.com/stencil-operator/stencil/reconciler/rollout"
	"github.com/stencil-operator/stencil/reconciler/shard"
	"github.com/stencil-operator/stencil/render"
)

// managerOptions are the operator's flags.
type managerOptions struct {
	project          *operator // the operator's kinds and the cluster --kubeconfig names
	limits           render.Limits
	metricsAddr      string
	metricsSecure    bool
	metricsCertDir   string
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectionNS string
	concurrency      int
	reconcileTimeout time.Duration
	startupTimeout   time.Duration
	qps              float32
	burst            int
	compression      bool
	rollout          rollout.Options
	decorators       decoratorFlags
	shards           shard.Shards
	identities       reconciler.Identities
	watchNamespaces  []string
	templates        templateFlags
	webhook          webhookOptions
}

// decoratorFlags say which decorators run, where.
type decoratorFlags struct {
	enabled    []string
	objects    []string // <decorator>=<label selector>
	namespaces []string // <decorator>=<label selector>
	disabled   []string
}

func (o *managerOptions) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", `Address the Prometheus metrics endpoint binds to ("0" disables it).`)
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve metrics over HTTPS, only to clients that the API server authenticates and authorizes to GET /metrics (the ClusterRole stencil-metrics-reader allows it).")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Folder holding tls.crt and tls.key for --metrics-secure (default: a self-signed certificate).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", `Address Go's /debug/pprof profiles bind to ("0" disables them).`)
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader through a Lease so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	fs.IntVar(&o.concurrency, "concurrency", 8, "Custom resources reconciled at once, per kind.")
	o.limits = render.DefaultLimits
	fs.IntVar(&o.limits.Steps, "render-max-steps", render.DefaultLimits.Steps, "How much work one resource's templates may do, in steps (each template or include executed, range iteration, write and metered function call): the same on a busy machine as on an idle one. A render over it fails (Stalled, LimitExceeded) and nothing is applied or pruned.")
	fs.DurationVar(&o.limits.Time, "render-timeout", render.DefaultLimits.Time, "How long one resource's templates may execute, wall time: the backstop for work --render-max-steps does not count.")
	fs.IntVar(&o.limits.Bytes, "render-max-bytes", render.DefaultLimits.Bytes, "How many bytes one resource's templates may write (and allocate by a count: until, repeat, indent).")
	fs.IntVar(&o.limits.Objects, "render-max-objects", render.DefaultLimits.Objects, "How many objects one resource may render.")
	fs.IntVar(&o.limits.StatusBytes, "status-max-bytes", render.DefaultLimits.StatusBytes, "How many bytes a kind's status template may write for one resource.")
	fs.DurationVar(&o.reconcileTimeout, "reconcile-timeout", reconciler.DefaultReconcileTimeout, "Deadline of one reconcile; its status write has a deadline of its own.")
	fs.DurationVar(&o.startupTimeout, "startup-timeout", defaultStartupTimeout, "How long stencil may take at start to fill its caches (the first list of each owned and observed type), before it runs for leader election. Past it /healthz fails and stencil exits, rather than run without reconciling. /readyz fails until the caches are filled, unless the CRDs reach the conversion webhook through a Service. 0: no bound.")
	// API Priority and Fairness protects the API server; a low client-side
	// limit would only slow convergence.
	fs.Float32Var(&o.qps, "kube-api-qps", 500, "Client-side limit on requests per second to the API server.")
	fs.IntVar(&o.burst, "kube-api-burst", 1000, "Client-side burst of requests to the API server.")
	fs.IntVar(&o.rollout.Batch, "rollout-batch", rollout.DefaultBatch, "Resources per kind that a change of the templates alone (a new stencil version) reaches at a time: the next one gets it when one of those is Ready. 0 applies such changes to every resource at once. Spec changes are never held back.")
	fs.DurationVar(&o.rollout.Deadline, "rollout-deadline", rollout.DefaultDeadline, "How long a resource that a template change reached may take to become Ready before the rollout of its kind halts.")
	fs.StringSliceVar(&o.decorators.enabled, "decorators", nil, "Decorators (by name) to run, e.g. replicaset-podcount,namespace-defaults. A decorator not named is off: it watches and writes nothing (docs/add-decorator.md).")
	fs.StringArrayVar(&o.decorators.namespaces, "decorator-namespace-selector", nil, `<decorator>=<label selector>: the decorator decorates only the objects in the namespaces whose labels match (a Namespace: its own labels), e.g. replicaset-podcount=stencil.dev/podcount=on. Once per decorator.`)
	fs.StringArrayVar(&o.decorators.objects, "decorator-object-selector", nil, `<decorator>=<label selector>: the decorator decorates, and caches, only the objects whose labels match. Once per decorator.`)
	fs.StringSliceVar(&o.decorators.disabled, "disable-decorator", nil, "Decorators (by name) that give up what they set: their labels and annotations on every object they decorated, and the objects they created. Run with a decorator disabled before deleting its folder, or to remove what it set before it was turned off; else its labels stay behind.")
	fs.StringVar(&o.shards.Name, "shard", "", "The shard this process reconciles: the custom resources labelled stencil.dev/shard=<shard>. Empty: the default shard, every resource whose label names none of --shards. Each shard elects its own leader.")
	fs.StringSliceVar(&o.shards.Known, "shards", nil, "Every shard but the default, the same list for every process.")
	fs.StringVar(&o.identities.Default, "default-service-account", "", "ServiceAccount, in each custom resource's namespace, that writes the resource's objects (stencil impersonates it; its RBAC bounds what a resource can make). Empty: stencil writes them with its own identity. See docs/tenancy.md.")
	fs.StringSliceVar(&o.watchNamespaces, "watch-namespaces", nil, "Namespaces whose custom resources this stencil reconciles, comma-separated: a namespace-scoped install (a RoleBinding to stencil's ClusterRole in each grants what it needs there; config/namespaced, docs/tenancy.md). Empty: every namespace. Decorators, which work across namespaces, and kinds that own cluster-scoped types cannot run then.")
	fs.StringToStringVar(&o.identities.ByKind, "kind-service-account", nil, "Per kind, the ServiceAccount that writes its objects, over --default-service-account: Kind=name, comma-separated (an empty name: stencil's own identity).")
	o.templates.bind(fs)
	o.webhook.bind(fs)
	fs.BoolVar(&o.compression, "kube-api-compression", false, "Ask the API server to gzip its answers and watch streams (for a slow link; costs its CPU).")
}

// scopes are the enabled decorators and their scopes, from the flags. The
// names are checked against the loaded decorators by
// decorator.Setup.
func (f decoratorFlags) scopes() (map[string]decorator.Scope, error) {
	scopes := map[string]decorator.Scope{}
	for _, name := range f.enabled {
		if name = strings.TrimSpace(name); name != "" {
			scopes[name] = decorator.Scope{}
		}
	}
	set := func(flag string, values []string, put func(*decorator.Scope, labels.Selector)) error {
		seen := map[string]bool{}
		for _, v := range values {
			name, expr, ok := strings.Cut(v, "=")
			if !ok || name == "" {
				return fmt.Errorf("--%s %q: want <decorator>=<label selector>, e.g. replicaset-podcount=stencil.dev/podcount=on", flag, v)
			}
			sc, on := scopes[name]
			if !on {
				return fmt.Errorf("--%s %q: decorator %s is not in --decorators", flag, v, name)
			}
			if seen[name] {
				return fmt.Errorf("--%s: decorator %s is given twice (one selector may hold several requirements: a=b,c in (d,e))", flag, name)
			}
			seen[name] = true
			sel, err := labels.Parse(expr)
			if err != nil {
				return fmt.Errorf("--%s %q: %w", flag, v, err)
			}
			if sel.Empty() {
				return fmt.Errorf("--%s %q: an empty selector selects everything; leave the flag out", flag, v)
			}
			put(&sc, sel)
			scopes[name] = sc
		}
		return nil
	}
	if err := set("decorator-namespace-selector", f.namespaces, func(s *decorator.Scope, sel labels.Selector) { s.Namespaces = sel }); err != nil {
		return nil, err
	}
	if err := set("decorator-object-selector", f.objects, func(s *decorator.Scope, sel labels.Selector) { s.Objects = sel }); err != nil {
		return nil, err
	}
	return scopes, nil
}

// checkIdentities refuses a --kind-service-account for a kind stencil does
// not run (a typo would silently leave the kind to a wider identity) and
// ServiceAccount names that are not names.
func checkIdentities(ids reconciler.Identities, loaded []*render.Kind) error {
	known := map[string]bool{}
	for _, k := range loaded {
		known[k.GroupVersionKind().Kind] = true
	}
	names := map[string]string{"--default-service-account": ids.Default}
	for kind, sa := range ids.ByKind {
		if !known[kind] {
			return fmt.Errorf("--kind-service-account: no kind %q (kinds: %s)", kind, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
		names["--kind-service-account "+kind] = sa
	}
	for flag, sa := range names {
		if errs := validation.IsDNS1123Subdomain(sa); sa != "" && len(errs) > 0 {
			return fmt.Errorf("%s: %q is not a ServiceAccount name: %s", flag, sa, strings.Join(errs, "; "))
		}
	}
	return nil
}

// namespaceScoped restricts the cache to the namespaces of
// --watch-namespaces (a namespace-scoped install), and refuses what needs
// more: decorators, and kinds that own cluster-scoped types.
func namespaceScoped(cacheOpts *cache.Options, o managerOptions, loaded []*render.Kind, scopes map[string]decorator.Scope) error {
	if len(scopes) > 0 || len(o.decorators.disabled) > 0 {
		return errors.New("--watch-namespaces: decorators work across namespaces; run them in a cluster-wide stencil")
	}
	if len(o.shards.Known) > 0 {
		return errors.New("--watch-namespaces: shards list resources across namespaces; run one namespace-scoped stencil per set of namespaces instead")
	}
	for _, k := range loaded {
		for _, t := range k.Declaration().Owns {
			if t.ClusterScoped {
				return fmt.Errorf("--watch-namespaces: kind %s owns the cluster-scoped %s, which a namespace-scoped stencil may not write", k.GroupVersionKind().Kind, t.Kind)
			}
		}
	}
	for _, k := range loaded {
		for name, in := range k.Graph().Inputs() {
			if in.Namespace != "" && !slices.Contains(o.watchNamespaces, in.Namespace) {
				return fmt.Errorf("--watch-namespaces: kind %s reads its input %s in namespace %s; add it to --watch-namespaces, with a RoleBinding there that lets stencil get, list and watch %s", k.GroupVersionKind().Kind, name, in.Namespace, in.TypeRef().PluralResource())
			}
		}
	}
	cacheOpts.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range o.watchNamespaces {
		cacheOpts.DefaultNamespaces[ns] = cache.Config{}
	}
	return nil
}

// tuneClient sets the client-side limits and, unless asked for, turns off
// gzip: the API server would spend CPU compressing every watch event for an
// operator that normally runs next to it (kube-controller-manager and
// kube-scheduler turn it off too). A kubeconfig's disable-compression: true
// always wins.
func tuneClient(cfg *rest.Config, o managerOptions) {
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.DisableCompression = cfg.DisableCompression || !o.compression
}

// metricsOptions serves metrics over plain HTTP, or, with --metrics-secure,
// over HTTPS to clients that the API server authenticates (TokenReview) and
// authorizes (SubjectAccessReview) for GET /metrics.
func metricsOptions(o managerOptions) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = metricsauth.Filter
		opts.CertDir = o.metricsCertDir // empty: self-signed, unless controller-runtime's default folder holds one
	}
	return opts
}

// leaderElectionID names the Lease that the operator's replicas compete
// for: stencil.stencil.dev for stencil, <name>.stencil.dev for a project's.
func leaderElectionID(operator string) string { return operator + ".stencil.dev" }

// The leader election's timings (controller-runtime's defaults, set here
// because the fence depends on them): a standby takes the Lease over after
// leaseDuration without a renewal; the leader gives up when it could not
// renew for renewDeadline, which is also the fence's window.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	// fenceMargin: a write the fence lets through is to be done this long
	// before a standby could take the Lease over.
	fenceMargin = 2 * time.Second
	// takeoverWait: a shard takes over the claims of a shard whose Lease
	// it has seen unchanged this long. Twice the lease duration: that
	// shard's fence closed at least a lease duration before, and a
	// rolling update of it renews its Lease well within it.
	takeoverWait = 2 * leaseDuration
)

// defaultStartupTimeout bounds the filling of the caches at start (see
// startup): controller-runtime's bound on a controller's own cache sync.
const defaultStartupTimeout = 2 * time.Minute

// inClusterNamespace is where a pod finds its namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaseNamespace is the namespace of the leader election Leases: the flag's,
// else the pod's, as controller-runtime finds it.
func leaseNamespace(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	data, err := os.ReadFile(inClusterNamespace)
	if err != nil {
		return "", fmt.Errorf("--leader-election-namespace is not set and this process is not in a pod (%w): set it", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// runManager runs the operator until ctx ends: it checks the flags, loads
// and checks the templates, builds the manager, sets up the kinds, the
// conversion webhook and the decorators on it, and starts it.
func runManager(ctx context.Context, o managerOptions, root logr.Logger) error {
	log := root.WithName("setup")
	selector, scopes, err := checkManagerOptions(o)
	if err != nil {
		return err
	}
	lease := o.shards.LeaseName(leaderElectionID(o.project.Name))
	cfg, unfenced, mayWrite, err := managerConfig(o, lease)
	if err != nil {
		return err
	}
	folders, prepare, defaults, err := loadFolders(ctx, cfg, o, log)
	if err != nil {
		return err
	}
	loaded, decorators := kinds.Split(folders)
	if len(o.watchNamespaces) > 0 {
		decorators = nil // not even the leftover check: it lists across namespaces
	}
	mgr, hook, err := newManager(ctx, cfg, unfenced, o, lease, loaded, selector, scopes, root)
	if err != nil {
		return err
	}
	live, err := setUpKinds(mgr, &o, loaded, mayWrite, prepare, defaults)
	if err != nil {
		return err
	}
	if hook != nil {
		if err := addConversion(mgr, hook, cfg, live, log); err != nil {
			return err
		}
	}
	decOpts, err := setUpDecorators(mgr, o, decorators, scopes, mayWrite)
	if err != nil {
		return err
	}
	if err := setUpProject(mgr, o.project.Setup); err != nil {
		return err
	}
	started := newStartup(o.startupTimeout, hook != nil && o.webhook.url == "", log)
	if err := addStartupChecks(mgr, started); err != nil {
		return err
	}
	log.Info("Starting manager", "host", cfg.Host, "kinds", len(loaded), "decorators", slices.Sorted(maps.Keys(decOpts.Enabled)), "disabledDecorators", decOpts.Disabled, "leaderElection", o.leaderElect, "startupTimeout", o.startupTimeout)
	if err := started.run(ctx, mgr.Start); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// addStartupChecks adds started to mgr, and the probes that see it:
// /healthz and /readyz fail as startup says.
func addStartupChecks(mgr ctrl.Manager, started *startup) error {
	if err := mgr.Add(started); err != nil {
		return fmt.Errorf("adding the start-up check: %w", err)
	}
	if err := mgr.AddHealthzCheck("caches", started.live); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", started.ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	return nil
}

// checkManagerOptions checks the rollout, shard and decorator flags, and
// returns the shard's label selector and the decorators' scopes.
func checkManagerOptions(o managerOptions) (labels.Selector, map[string]decorator.Scope, error) {
	if o.rollout.Batch < 0 || o.rollout.Batch > 0 && o.rollout.Deadline <= 0 {
		return nil, nil, fmt.Errorf("--rollout-batch must be 0 (no pacing) or more, with a --rollout-deadline above 0; got %d and %s", o.rollout.Batch, o.rollout.Deadline)
	}
	if err := o.shards.Check(); err != nil {
		return nil, nil, err
	}
	selector, err := o.shards.Selector()
	if err != nil {
		return nil, nil, err
	}
	scopes, err := o.decorators.scopes()
	if err != nil {
		return nil, nil, err
	}
	return selector, scopes, nil
}

// managerConfig is the client configuration from the kubeconfig, tuned
// (see tuneClient), and a copy of it made before the fence wraps it
// (unfenced). With leader election, cfg writes only while the Lease named
// lease is fresh, and mayWrite says whether a write may go now (see
// fence.Fence.Open); without, mayWrite is nil.
func managerConfig(o managerOptions, lease string) (cfg, unfenced *rest.Config, mayWrite func() error, err error) {
	cfg, err = o.project.restConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	tuneClient(cfg, o)
	// Every replica serves the conversion webhook and keeps its
	// certificate, leader or not: its writes go round the fence.
	unfenced = rest.CopyConfig(cfg)
	if o.leaderElect {
		// Writes only while the Lease is fresh (see package fence).
		f := fence.New(o.leaderElectionNS, lease, renewDeadline, leaseDuration-fenceMargin)
		cfg.Wrap(f.Wrap)
		mayWrite = f.Open
	}
	return cfg, unfenced, mayWrite, nil
}

// loadFolders loads the kinds' and decorators' folders, prepared for the
// limits and the cluster's Kubernetes version (prepare, which prepares
// the folders reloaded later too), and refuses templates that fail their
// own test cases, defaulted as the cluster's CRDs default (defaults).
func loadFolders(ctx context.Context, cfg *rest.Config, o managerOptions, log logr.Logger) (folders []kinds.Folder, prepare func(kinds.Folder) kinds.Folder, defaults render.Validator, err error) {
	if err := o.templates.check(); err != nil {
		return nil, nil, nil, err
	}
	folders, err = o.project.Folders(o.templates.dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("loading templates: %w", err)
	}
	if err := o.limits.Check(); err != nil {
		return nil, nil, nil, err
	}
	kube, err := kubeVersion(cfg, folders)
	if err != nil {
		return nil, nil, nil, err
	}
	prepare = func(f kinds.Folder) kinds.Folder { return f.WithLimits(o.limits).WithKubeVersion(kube) }
	for i := range folders {
		folders[i] = prepare(folders[i])
	}
	defaults, err = crdDefaults(ctx, cfg, folders, log)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := kinds.CheckRenders(folders, defaults); err != nil {
		return nil, nil, nil, fmt.Errorf("refusing to run templates that fail their own test cases (stencil test names them): %w", err)
	}
	return folders, prepare, defaults, nil
}

// newManager builds the manager of the loaded kinds: its scheme, its cache
// (the custom resources selector selects, in the watched namespaces if
// any) and its conversion webhook (hook, nil when no kind has several
// versions), which writes through unfenced.
func newManager(ctx context.Context, cfg, unfenced *rest.Config, o managerOptions, lease string, loaded []*render.Kind, selector labels.Selector, scopes map[string]decorator.Scope, log logr.Logger) (ctrl.Manager, *conversionWebhook, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), o.project.AddTo(scheme)); err != nil {
		return nil, nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := checkIdentities(o.identities, loaded); err != nil {
		return nil, nil, err
	}
	cacheOpts := reconciler.ShardCacheOptions(loaded, selector)
	if len(o.watchNamespaces) > 0 {
		if err := namespaceScoped(&cacheOpts, o, loaded, scopes); err != nil {
			return nil, nil, err
		}
	}
	hook, err := setUpConversion(ctx, unfenced, o, loaded, log.WithName("setup"))
	if err != nil {
		return nil, nil, err
	}
	mgrOpts := ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		Cache:                         cacheOpts,
		NewCache:                      reconciler.NewCache, // a kind whose CRD is missing does not stop the others
		Client:                        reconciler.ClientOptions(),
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              lease,
		LeaderElectionNamespace:       o.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 new(leaseDuration),
		RenewDeadline:                 new(renewDeadline),
		RetryPeriod:                   new(2 * time.Second),
	}
	if hook != nil {
		mgrOpts.WebhookServer = hook.server
	} else {
		// The project's own webhooks (Setup: mgr.GetWebhookServer()),
		// served only when Setup registers one, with the flags' address
		// and certificate.
		host, port, err := o.webhook.address()
		if err != nil {
			return nil, nil, err
		}
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: o.webhook.certDir})
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, hook, nil
}

// setUpKinds sets up the loaded kinds' controllers on mgr, and the reload
// of their templates when asked for; it returns the kinds that run, for
// the conversion webhook (nil without reload).
func setUpKinds(mgr ctrl.Manager, o *managerOptions, loaded []*render.Kind, mayWrite func() error, prepare func(kinds.Folder) kinds.Folder, defaults render.Validator) (*reconciler.LiveKinds, error) {
	opts := reconciler.Options{SkipNameValidation: true, MaxConcurrentReconciles: o.concurrency, ReconcileTimeout: o.reconcileTimeout, Rollout: o.rollout, MayWrite: mayWrite, Identities: o.identities, Namespaces: o.watchNamespaces}
	if len(o.shards.Known) > 0 {
		opts.Shards = &o.shards
		if o.leaderElect {
			ns, err := leaseNamespace(o.leaderElectionNS)
			if err != nil {
				return nil, err
			}
			opts.Shards.Leases = &shard.Leases{Namespace: ns, Base: leaderElectionID(o.project.Name), Wait: takeoverWait}
		}
	}
	if o.templates.reload {
		opts.Live = &reconciler.LiveKinds{}
	}
	if err := reconciler.Setup(mgr, loaded, opts); err != nil {
		return nil, fmt.Errorf("setting up the kinds' controllers: %w", err)
	}
	if err := watchTemplates(mgr, o.templates, o.project.Set, prepare, opts.Live, defaults); err != nil {
		return nil, err
	}
	return opts.Live, nil
}

// setUpProject adds the project's own Go controllers, webhooks and
// runnables (stencil.Project.Setup) to mgr, beside the templates'.
func setUpProject(mgr ctrl.Manager, setup func(ctrl.Manager) error) error {
	if setup == nil {
		return nil
	}
	if err := setup(mgr); err != nil {
		return fmt.Errorf("the project's Setup: %w", err)
	}
	return nil
}

// addConversion adds the conversion webhook hook to mgr: its handlers,
// its server, its certificate's check and the storage migration.
func addConversion(mgr ctrl.Manager, hook *conversionWebhook, cfg *rest.Config, live *reconciler.LiveKinds, log logr.Logger) error {
	hook.register(live, log)
	_ = mgr.GetWebhookServer() // adds the server to the manager
	if hook.certs != nil {
		if err := mgr.Add(hook.certs); err != nil {
			return fmt.Errorf("adding the webhook certificate's check: %w", err)
		}
	}
	m, err := hook.migrator(cfg, log)
	if err != nil {
		return err
	}
	m.Recorder = mgr.GetEventRecorder("stencil")
	if err := mgr.Add(m); err != nil {
		return fmt.Errorf("adding the storage migration: %w", err)
	}
	return nil
}

// setUpDecorators sets up the decorators' controllers on mgr, with the
// scopes of the flags; a shard other than the default runs none. It
// returns the options they run with.
func setUpDecorators(mgr ctrl.Manager, o managerOptions, decorators []*render.Decorator, scopes map[string]decorator.Scope, mayWrite func() error) (decorator.Options, error) {
	decOpts := decorator.Options{SkipNameValidation: true, MaxConcurrentReconciles: o.concurrency, ReconcileTimeout: o.reconcileTimeout, MayWrite: mayWrite, Enabled: scopes, Disabled: o.decorators.disabled}
	if o.shards.Name != "" {
		// The default shard runs the decorators: one writer of their labels.
		decorators, decOpts.Enabled, decOpts.Disabled = nil, nil, nil
	}
	return decOpts, decorator.Setup(mgr, decorators, decOpts)
}

// kubeVersion is the cluster's Kubernetes version, which chart kinds read
// as .Capabilities.KubeVersion; without a chart kind it is not asked.
func kubeVersion(cfg *rest.Config, folders []kinds.Folder) (render.KubeVersion, error) {
	if !slices.ContainsFunc(folders, func(f kinds.Folder) bool { return f.Kind != nil && f.Kind.Chart() != nil }) {
		return render.ParseKubeVersion(render.DefaultKubeVersion)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return render.KubeVersion{}, fmt.Errorf("asking the cluster's version: %w", err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return render.KubeVersion{}, fmt.Errorf("asking the cluster's version: %w", err)
	}
	return render.ParseKubeVersion(info.GitVersion)
}
