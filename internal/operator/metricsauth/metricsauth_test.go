package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// fakeReview answers with a fixed status per token and counts the calls.
// (The real TokenReview and SubjectAccessReview are exercised by the e2e
// suite against a real API server.)
type fakeReview struct {
	status map[string]int
	err    error
	calls  int
}

func (f *fakeReview) review(_ context.Context, token, verb, path string) (int, error) {
	f.calls++
	if f.err != nil {
		return 0, f.err
	}
	if verb != "get" || path != "/metrics" {
		return http.StatusForbidden, nil
	}
	if s, ok := f.status[token]; ok {
		return s, nil
	}
	return http.StatusUnauthorized, nil
}

func TestGuard(t *testing.T) {
	tests := []struct {
		name       string
		header     string
		method     string
		err        error
		wantStatus int
		wantNext   bool
		wantCalls  int
	}{
		{"no header", "", http.MethodGet, nil, http.StatusUnauthorized, false, 0},
		{"not a bearer token", "Basic dXNlcjpwYXNz", http.MethodGet, nil, http.StatusUnauthorized, false, 0},
		{"empty bearer token", "Bearer ", http.MethodGet, nil, http.StatusUnauthorized, false, 0},
		{"a token the API server rejects", "Bearer nobody", http.MethodGet, nil, http.StatusUnauthorized, false, 1},
		{"a user not allowed", "Bearer stranger", http.MethodGet, nil, http.StatusForbidden, false, 1},
		{"a user allowed", "Bearer scraper", http.MethodGet, nil, http.StatusOK, true, 1},
		{"a user allowed, scheme in lower case", "bearer scraper", http.MethodGet, nil, http.StatusOK, true, 1},
		{"a user allowed to get, posting", "Bearer scraper", http.MethodPost, nil, http.StatusForbidden, false, 1},
		{"the API server cannot be asked", "Bearer scraper", http.MethodGet, errors.New("connection refused"), http.StatusServiceUnavailable, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeReview{status: map[string]int{"scraper": http.StatusOK, "stranger": http.StatusForbidden}, err: tt.err}
			called := false
			g := newGuard(f.review, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				called = true
				_, _ = fmt.Fprint(w, "stencil_metric 1")
			}), logr.Discard())
			req := httptest.NewRequest(tt.method, "/metrics", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || called != tt.wantNext || f.calls != tt.wantCalls {
				t.Errorf("status %d, metrics served %v, reviews %d; want %d, %v, %d", rec.Code, called, f.calls, tt.wantStatus, tt.wantNext, tt.wantCalls)
			}
		})
	}
}

func TestGuardRemembersDecisions(t *testing.T) {
	f := &fakeReview{status: map[string]int{"scraper": http.StatusOK, "stranger": http.StatusForbidden}}
	g := newGuard(f.review, http.NotFoundHandler(), logr.Discard())
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	g.now = func() time.Time { return now }
	decide := func(token string) int {
		t.Helper()
		s, err := g.decide(t.Context(), token, "get", "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	steps := []struct {
		name      string
		advance   time.Duration
		token     string
		want      int
		wantCalls int
	}{
		{"first allow asks", 0, "scraper", http.StatusOK, 1},
		{"allow remembered", 59 * time.Second, "scraper", http.StatusOK, 1},
		{"allow expired after a minute", 2 * time.Second, "scraper", http.StatusOK, 2},
		{"first refusal asks", 0, "stranger", http.StatusForbidden, 3},
		{"refusal remembered", 9 * time.Second, "stranger", http.StatusForbidden, 3},
		{"refusal expired after ten seconds", 2 * time.Second, "stranger", http.StatusForbidden, 4},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if got := decide(s.token); got != s.want || f.calls != s.wantCalls {
			t.Fatalf("%s: status %d after %d reviews; want %d after %d", s.name, got, f.calls, s.want, s.wantCalls)
		}
	}

	f.err = errors.New("timeout")
	now = now.Add(time.Hour)
	for range 2 {
		if _, err := g.decide(t.Context(), "scraper", "get", "/metrics"); err == nil {
			t.Fatal("the API server cannot be asked: want an error")
		}
	}
	if f.calls != 6 {
		t.Errorf("%d reviews; want a new one for each request while the API server cannot answer", f.calls)
	}
}

func TestGuardCacheIsBounded(t *testing.T) {
	f := &fakeReview{status: map[string]int{}}
	g := newGuard(f.review, http.NotFoundHandler(), logr.Discard())
	for i := range maxEntries + 10 {
		if _, err := g.decide(t.Context(), fmt.Sprint("token-", i), "get", "/metrics"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(g.decisions); n > maxEntries {
		t.Errorf("%d decisions kept, want at most %d", n, maxEntries)
	}
}
