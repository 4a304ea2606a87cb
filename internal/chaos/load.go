package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil/ledger"
)

// Load describes the writers that run during a scenario.
type Load struct {
	Writers int           // goroutines, each appending and waiting for its call
	Regions int           // regions 1..Regions of one namespace, shared by all writers
	Size    int           // payload bytes per entry
	Pace    time.Duration // pause between one writer's calls (0: none)
	// CallTimeout is the context deadline of every call: a guard so that a
	// call the store fails to bound still ends; the store's own
	// ProduceTimeout should always fire first.
	CallTimeout time.Duration
}

// Writers runs a Load until Halt; it owns its goroutines.
type Writers struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	timeouts int            // failed calls whose error matches kafka.ErrTimeout
	errs     map[string]int // failed calls by the first line of their error
}

// StartLoad starts the writers on s, recording every call in l.
func StartLoad(s ledger.Appender, l *ledger.Ledger, ns string, ld Load) *Writers {
	w := &Writers{stop: make(chan struct{}), errs: map[string]int{}}
	for i := range ld.Writers {
		w.wg.Add(1)
		go w.run(s, l, ns, ld, uint32(i+1))
	}
	return w
}

func (w *Writers) run(s ledger.Appender, l *ledger.Ledger, ns string, ld Load, id uint32) {
	defer w.wg.Done()
	var seq uint64
	var pace <-chan time.Time
	if ld.Pace > 0 {
		t := time.NewTicker(ld.Pace)
		defer t.Stop()
		pace = t.C
	}
	for n := 0; ; n++ {
		select {
		case <-w.stop:
			return
		default:
		}
		// Mostly one region per call; every fifth call carries two, so that
		// calls spanning regions are checked too.
		regions := 1
		if n%5 == 4 && ld.Regions > 1 {
			regions = 2
		}
		tags := make([]ledger.Tag, regions)
		for k := range tags {
			seq++
			tags[k] = ledger.Tag{Region: logstore.RegionID((int(id)+n+k)%ld.Regions + 1), Writer: id, Seq: seq}
		}
		ctx, cancel := context.WithTimeout(context.Background(), ld.CallTimeout)
		_, err := l.Append(ctx, s, ns, tags, ld.Size)
		cancel()
		if err != nil {
			w.mu.Lock()
			if errors.Is(err, kafka.ErrTimeout) {
				w.timeouts++
			}
			msg, _, _ := strings.Cut(err.Error(), "\n")
			if len(msg) > 160 {
				msg = msg[:160] + "..."
			}
			w.errs[msg]++
			w.mu.Unlock()
		}
		if pace != nil {
			select {
			case <-w.stop:
				return
			case <-pace:
			}
		}
	}
}

// Halt stops the writers once their calls in flight end, and waits.
func (w *Writers) Halt() {
	close(w.stop)
	w.wg.Wait()
}

// Errors returns how many failed calls' errors matched kafka.ErrTimeout,
// and every failed call's error, most frequent first, as "count × first
// line".
func (w *Writers) Errors() (timeouts int, lines []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := slices.Collect(maps.Keys(w.errs))
	slices.SortFunc(keys, func(a, b string) int { return w.errs[b] - w.errs[a] })
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%d × %s", w.errs[k], k))
	}
	return w.timeouts, lines
}
