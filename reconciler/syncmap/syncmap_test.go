package syncmap

import (
	"sync"
	"testing"
)

func TestMap(t *testing.T) {
	var m Map[string, int]
	if v, ok := m.Load("a"); ok || v != 0 {
		t.Fatalf("an empty map loads %d, %v", v, ok)
	}
	m.Store("a", 1)
	if v, loaded := m.LoadOrStore("a", 2); !loaded || v != 1 {
		t.Errorf("LoadOrStore of a stored key: %d, %v; want 1, true", v, loaded)
	}
	if v, loaded := m.LoadOrStore("b", 2); loaded || v != 2 {
		t.Errorf("LoadOrStore of a new key: %d, %v; want 2, false", v, loaded)
	}
	sum := 0
	m.Range(func(_ string, v int) bool { sum += v; return true })
	if sum != 3 {
		t.Errorf("Range saw a sum of %d, want 3", sum)
	}
	if v, ok := m.LoadAndDelete("a"); !ok || v != 1 {
		t.Errorf("LoadAndDelete: %d, %v; want 1, true", v, ok)
	}
	m.Delete("b")
	if _, ok := m.Load("b"); ok {
		t.Errorf("a deleted key loads")
	}
}

func TestMapConcurrently(t *testing.T) {
	var m Map[int, int]
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				m.Store(i*100+j, j)
				m.Load(j)
			}
		})
	}
	wg.Wait()
	n := 0
	m.Range(func(int, int) bool { n++; return true })
	if n != 800 {
		t.Errorf("%d keys stored, want 800", n)
	}
}
