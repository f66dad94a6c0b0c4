package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requests counts API requests by "verb resource[/subresource]".
type requests map[string]int

// total is the number of requests other than watches (a watch is one
// long-running request that stays open; it is counted when it starts).
func (r requests) total() int {
	n := 0
	for k, v := range r {
		if !isWatch(k) {
			n += v
		}
	}
	return n
}

func isWatch(key string) bool { return strings.HasPrefix(key, "watch ") }

// String lists the counts, largest first.
func (r requests) String() string {
	keys := slices.SortedFunc(maps.Keys(r), func(a, b string) int {
		if r[a] != r[b] {
			return r[b] - r[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, r[k])
	}
	return strings.Join(parts, ", ")
}

// auditEvent is the part of an audit.k8s.io/v1 Event the bench reads.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestURI               string           `json:"requestURI"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// key names what the request did: verb and resource, or the path for
// requests that name no object (discovery).
func (e *auditEvent) key() string {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		path, _, _ := strings.Cut(e.RequestURI, "?")
		return e.Verb + " " + path
	}
	if e.ObjectRef.Subresource != "" {
		return e.Verb + " " + e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.Verb + " " + e.ObjectRef.Resource
}

// counted: a request is counted once, when it completes, or for a watch
// when its response starts.
func (e *auditEvent) counted() bool {
	if e.Verb == "watch" {
		return e.Stage == "ResponseStarted"
	}
	return e.Stage == "ResponseComplete" || e.Stage == "Panic"
}

// countRequests counts the requests of user that the API server received in
// [from, to), from its audit log.
func countRequests(path, user string, from, to time.Time) (requests, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	counts := requests{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		at := e.RequestReceivedTimestamp.Time
		if e.User.Username != user || !e.counted() || at.Before(from) || !at.Before(to) {
			continue
		}
		counts[e.key()]++
	}
	return counts, scanner.Err()
}
