package worker

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Client is what a lane needs from a Kafka client; *kgo.Client has it.
type Client interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Lanes is a pool of produce lanes shared by every topic's worker. A lane is
// one Kafka client (one produce connection per broker) that carries one
// group at a time: the group's records become their own record batch(es),
// never mixed with another group's, and up to len(lanes) groups are in flight
// at once. Lanes own no goroutine; the workers that borrow them do.
type Lanes struct {
	free    chan *lane
	running sync.WaitGroup
}

type lane struct {
	id     int
	client Client
}

// NewLanes returns a pool over clients; the caller keeps owning the clients
// and closes them after Lanes.Wait (closing a client unblocks a produce that
// is stuck on it).
func NewLanes(clients []Client) *Lanes {
	l := &Lanes{free: make(chan *lane, len(clients))}
	for i, c := range clients {
		l.free <- &lane{id: i, client: c}
	}
	return l
}

// Len is the number of lanes.
func (l *Lanes) Len() int { return cap(l.free) }

// Wait returns once no produce borrowed from the pool is running.
func (l *Lanes) Wait() { l.running.Wait() }

// produce runs fn's produce on ln in a goroutine that returns the lane when
// it is done; the goroutine is tracked so that Wait can see it end.
func (l *Lanes) produce(ln *lane, fn func(Client)) {
	l.running.Add(1)
	go func() {
		defer l.running.Done()
		fn(ln.client)
		l.free <- ln
	}()
}
