package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long a decision of the API server is remembered, and how many at most.
const (
	allowTTL   = time.Minute
	denyTTL    = 10 * time.Second
	maxEntries = 1024
)

// Filter is a metrics server filter (metricsserver.Options.FilterProvider)
// that lets through only what the API server authenticates and authorizes.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the TokenReview client: %w", err)
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the SubjectAccessReview client: %w", err)
	}
	r := reviewer{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews()}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return newGuard(r.review, next, log), nil
	}, nil
}

// reviewFunc asks who token is and whether they may use verb on path, and
// answers with the HTTP status the request deserves: 200, 401 or 403.
type reviewFunc func(ctx context.Context, token, verb, path string) (int, error)

type reviewer struct {
	tokens authnclient.TokenReviewInterface
	access authzclient.SubjectAccessReviewInterface
}

func (r reviewer) review(ctx context.Context, token, verb, path string) (int, error) {
	tr, err := r.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("reviewing the token: %w", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	user := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := r.access.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("reviewing access of %q: %w", user.Username, err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// guard is the handler in front of the metrics.
type guard struct {
	review reviewFunc
	next   http.Handler
	log    logr.Logger
	now    func() time.Time

	mu        sync.Mutex
	decisions map[[sha256.Size]byte]decision
}

type decision struct {
	status int
	until  time.Time
}

func newGuard(review reviewFunc, next http.Handler, log logr.Logger) *guard {
	return &guard{review: review, next: next, log: log, now: time.Now, decisions: map[[sha256.Size]byte]decision{}}
}

func (g *guard) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	token, ok := bearerToken(req)
	if !ok {
		http.Error(w, "Unauthorized: send a bearer token", http.StatusUnauthorized)
		return
	}
	status, err := g.decide(req.Context(), token, strings.ToLower(req.Method), req.URL.Path)
	if err != nil {
		g.log.Error(err, "Cannot authorize a metrics request")
		http.Error(w, "Cannot authorize the request now", http.StatusServiceUnavailable)
		return
	}
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	g.next.ServeHTTP(w, req)
}

// decide answers from a remembered decision, or asks the API server.
func (g *guard) decide(ctx context.Context, token, verb, path string) (int, error) {
	key := sha256.Sum256([]byte(verb + " " + path + " " + token))
	now := g.now()
	g.mu.Lock()
	d, ok := g.decisions[key]
	g.mu.Unlock()
	if ok && now.Before(d.until) {
		return d.status, nil
	}
	status, err := g.review(ctx, token, verb, path)
	if err != nil {
		return 0, err
	}
	ttl := denyTTL
	if status == http.StatusOK {
		ttl = allowTTL
	}
	g.remember(key, decision{status: status, until: now.Add(ttl)}, now)
	return status, nil
}

// remember keeps d, first making room if the cache is full: expired
// decisions go, and if none has expired, all do.
func (g *guard) remember(key [sha256.Size]byte, d decision, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.decisions) >= maxEntries {
		for k, old := range g.decisions {
			if !now.Before(old.until) {
				delete(g.decisions, k)
			}
		}
		if len(g.decisions) >= maxEntries {
			clear(g.decisions)
		}
	}
	g.decisions[key] = d
}

// bearerToken is the token of an "Authorization: Bearer <token>" header.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}
