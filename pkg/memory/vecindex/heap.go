package vecindex

// scored pairs a slot with its cosine similarity to the query.
type scored struct {
	sim  float32
	slot uint32
}

// minHeap keeps the worst (lowest similarity) item on top: the result set.
type minHeap struct{ items []scored }

func (h *minHeap) len() int      { return len(h.items) }
func (h *minHeap) peek() scored  { return h.items[0] }
func (h *minHeap) reset()        { h.items = h.items[:0] }
func (h *minHeap) push(x scored) { h.items = append(h.items, x); h.up(len(h.items) - 1) }

func (h *minHeap) pop() scored {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h *minHeap) replaceTop(x scored) {
	h.items[0] = x
	h.down(0)
}

func (h *minHeap) up(i int) {
	it := h.items
	for i > 0 {
		p := (i - 1) / 2
		if it[p].sim <= it[i].sim {
			break
		}
		it[p], it[i] = it[i], it[p]
		i = p
	}
}

func (h *minHeap) down(i int) {
	it := h.items
	n := len(it)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && it[r].sim < it[l].sim {
			m = r
		}
		if it[i].sim <= it[m].sim {
			return
		}
		it[i], it[m] = it[m], it[i]
		i = m
	}
}

// maxHeap keeps the best (highest similarity) item on top: the candidates
// still to expand.
type maxHeap struct{ items []scored }

func (h *maxHeap) len() int      { return len(h.items) }
func (h *maxHeap) reset()        { h.items = h.items[:0] }
func (h *maxHeap) push(x scored) { h.items = append(h.items, x); h.up(len(h.items) - 1) }

func (h *maxHeap) pop() scored {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h *maxHeap) up(i int) {
	it := h.items
	for i > 0 {
		p := (i - 1) / 2
		if it[p].sim >= it[i].sim {
			break
		}
		it[p], it[i] = it[i], it[p]
		i = p
	}
}

func (h *maxHeap) down(i int) {
	it := h.items
	n := len(it)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && it[r].sim > it[l].sim {
			m = r
		}
		if it[i].sim >= it[m].sim {
			return
		}
		it[i], it[m] = it[m], it[i]
		i = m
	}
}
