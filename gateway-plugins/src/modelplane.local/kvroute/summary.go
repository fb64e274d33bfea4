package kvroute

import (
	"container/list"
	"encoding/json"
	"net/http"
	"time"
)

const (
	summaryBits   = 1 << 16
	summaryHashes = 3
)

// mix64 is splitmix64's finalizer (Steele, Lea, Flood 2014), as modelplane/kvroute/summary.py's mix64.
func mix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// positions are the three 16-bit slices of a block's mix: its bits in the summary.
func positions(block uint64) [summaryHashes]int {
	h := mix64(block)
	const mask = summaryBits - 1
	return [summaryHashes]int{int(h & mask), int((h >> 16) & mask), int((h >> 32) & mask)}
}

// countingFilter keeps a count per bit position over the blocks every replica's index holds.
type countingFilter struct {
	counts []uint32
	bits   []byte
}

func newCountingFilter() *countingFilter {
	return &countingFilter{counts: make([]uint32, summaryBits), bits: make([]byte, summaryBits/8)}
}

func (f *countingFilter) add(block uint64) {
	for _, p := range positions(block) {
		if f.counts[p] == 0 {
			f.bits[p>>3] |= byte(1) << uint(p&7)
		}
		f.counts[p]++
	}
}

func (f *countingFilter) remove(block uint64) {
	for _, p := range positions(block) {
		f.counts[p]--
		if f.counts[p] == 0 {
			f.bits[p>>3] &^= byte(1) << uint(p&7)
		}
	}
}

// lru is one replica's blocks, least recently used first, at most capacity.
type lru struct {
	capacity int
	order    *list.List
	items    map[uint64]*list.Element
	onAdd    func(uint64)
	onEvict  func(uint64)
}

func newLRU(capacity int, onAdd, onEvict func(uint64)) *lru {
	return &lru{capacity: capacity, order: list.New(), items: map[uint64]*list.Element{}, onAdd: onAdd,
		onEvict: onEvict}
}

func (l *lru) prefix(blocks []uint64) int {
	n := 0
	for _, b := range blocks {
		if _, ok := l.items[b]; !ok {
			break
		}
		n++
	}
	return n
}

func (l *lru) touch(blocks []uint64) {
	for _, b := range blocks {
		if e, ok := l.items[b]; ok {
			l.order.MoveToBack(e)
			continue
		}
		l.items[b] = l.order.PushBack(b)
		l.onAdd(b)
	}
	for l.order.Len() > l.capacity {
		e := l.order.Front()
		b := e.Value.(uint64)
		l.order.Remove(e)
		delete(l.items, b)
		l.onEvict(b)
	}
}

// clear forgets every block, as an engine that restarts has none of them cached.
func (l *lru) clear() {
	for e := l.order.Front(); e != nil; e = l.order.Front() {
		b := e.Value.(uint64)
		l.order.Remove(e)
		delete(l.items, b)
		l.onEvict(b)
	}
}

func (r *Router) serveSummary(rw http.ResponseWriter) {
	data, err := json.Marshal(r.summary(time.Now().UnixMilli()))
	if err != nil {
		http.Error(rw, "summary", http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(data)
}
