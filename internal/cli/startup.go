package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The manager's start, watched. controller-runtime's Manager.Start serves
// the probes, the metrics and the conversion webhook first, then fills the
// caches of the types set up before it (the owned and observed types,
// indexed by owner), and only then runs the rest: the runnables that need
// no leader election, the leader election, the controllers. It waits for
// those caches with no bound and no log line (pkg/manager/internal.go, the
// Caches group), and once its context ends there it never returns
// (runnable_group.go loops on ctx.Done()). A cache that never fills (RBAC
// that forbids a list, a list the API server never answers) thus leaves a
// process that answers its probes and reconciles nothing, and that a
// SIGTERM does not stop.
//
// startup makes that visible and bounded: it logs when the caches are
// filled; /readyz fails until they are (see newStartup for the exception);
// /healthz fails, and runManager gives up with an error, once the bound
// has passed without, so that the process exits and its Deployment (or
// whoever runs it) starts another. A standby passes too: it has filled its
// caches and runs for the Lease.
type startup struct {
	bound time.Duration // 0: none
	// gateReady: /readyz waits for the caches.
	gateReady bool
	began     time.Time
	now       func() time.Time
	log       logr.Logger
	done      chan struct{}
	once      sync.Once
}

// newStartup watches a start that begins now and may take bound (0: no
// bound). /readyz waits for the caches unless webhookBehindService: when
// the CRDs reach the conversion webhook through a Service, whose endpoints
// are the ready pods, a cache of a type this webhook converts would wait
// for itself (controller-runtime serves webhooks before filling caches for
// that reason).
func newStartup(bound time.Duration, webhookBehindService bool, log logr.Logger) *startup {
	return &startup{bound: bound, gateReady: !webhookBehindService, began: time.Now(), now: time.Now, log: log, done: make(chan struct{})}
}

// Start marks the caches filled: the manager starts the runnables that
// need no leader election, this one among them, only once they are.
func (s *startup) Start(context.Context) error {
	s.once.Do(func() {
		s.log.Info("Caches filled; running for leader election", "after", s.now().Sub(s.began).Round(time.Millisecond))
		close(s.done)
	})
	return nil
}

// NeedLeaderElection is false: a standby fills its caches too.
func (s *startup) NeedLeaderElection() bool { return false }

func (s *startup) filled() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// errNotFilled: the manager has not filled its caches yet.
var errNotFilled = errors.New("the manager has not filled its caches yet: it neither leads nor runs for leader election")

// ready is the /readyz check.
func (s *startup) ready(*http.Request) error {
	if !s.gateReady || s.filled() {
		return nil
	}
	return errNotFilled
}

// live is the /healthz check: it fails once the bound has passed with the
// caches not filled.
func (s *startup) live(*http.Request) error {
	if s.filled() || s.bound == 0 || s.now().Sub(s.began) < s.bound {
		return nil
	}
	return fmt.Errorf("%w after %s (--startup-timeout)", errNotFilled, s.bound)
}

// startupLogEvery: how often run says it still waits for the caches.
// stopGrace: how long run waits, once its context ends, for the caches
// filled in that very moment.
const (
	startupLogEvery = 30 * time.Second
	stopGrace       = time.Second
)

// run runs start (the manager's Start) until ctx ends and start returns.
// It returns an error when the caches are not filled within the bound, and
// returns without start when ctx ends before they are (start would never
// return): nothing leads then, so there is no Lease to release and no
// write to finish.
func (s *startup) run(ctx context.Context, start func(context.Context) error) error {
	errs := make(chan error, 1)
	go func() { errs <- start(ctx) }()
	var expired <-chan time.Time
	if s.bound > 0 {
		timer := time.NewTimer(s.bound - s.now().Sub(s.began))
		defer timer.Stop()
		expired = timer.C
	}
	tick := time.NewTicker(startupLogEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-errs:
			return err
		case <-s.done:
			return <-errs
		case <-ctx.Done():
			select {
			case err := <-errs:
				return err
			case <-s.done:
				return <-errs
			case <-time.After(stopGrace):
				return nil
			}
		case <-tick.C:
			s.log.Info("Still filling the caches; the controllers and the leader election wait for them", "after", s.now().Sub(s.began).Round(time.Second), "bound", s.bound)
		case <-expired:
			return fmt.Errorf("%w after %s: giving up, for another process to try (--startup-timeout)", errNotFilled, s.bound)
		}
	}
}

var _ manager.LeaderElectionRunnable = (*startup)(nil)
