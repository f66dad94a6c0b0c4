// Package syncmap is sync.Map with types: a concurrent map whose keys and
// values need no type assertion. It holds what a controller remembers
// between reconciles and reads from its event handlers.
package syncmap

import "sync"

// Map is a sync.Map of K to V. The zero Map is empty and ready to use; it
// must not be copied after first use.
type Map[K comparable, V any] struct {
	m sync.Map
}

// Load is the value stored for key, and whether there is one.
func (m *Map[K, V]) Load(key K) (V, bool) {
	v, ok := m.m.Load(key)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

// Store sets the value for key.
func (m *Map[K, V]) Store(key K, value V) { m.m.Store(key, value) }

// LoadOrStore is the value stored for key when there is one (loaded
// true); else it stores value and returns it.
func (m *Map[K, V]) LoadOrStore(key K, value V) (actual V, loaded bool) {
	v, loaded := m.m.LoadOrStore(key, value)
	return v.(V), loaded
}

// LoadAndDelete deletes the value for key, returning it when there was one.
func (m *Map[K, V]) LoadAndDelete(key K) (V, bool) {
	v, ok := m.m.LoadAndDelete(key)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

// Delete deletes the value for key.
func (m *Map[K, V]) Delete(key K) { m.m.Delete(key) }

// Range calls f for each key and value until f returns false, as
// sync.Map.Range does.
func (m *Map[K, V]) Range(f func(K, V) bool) {
	m.m.Range(func(k, v any) bool { return f(k.(K), v.(V)) })
}
