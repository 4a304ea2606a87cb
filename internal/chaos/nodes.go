package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ClusterEnv names the environment variable that points the fault tests at
// a 3-node cluster started with `scripts/kafka.sh start --brokers 3`
// (comma-separated host:port of its brokers). The script's own variables
// (KWAL_KAFKA_HOME, KWAL_KAFKA_PORT) must name the same cluster, since the
// nodes are driven through it.
const ClusterEnv = "KWAL_KAFKA_CLUSTER3"

// Cluster drives the nodes of a cluster started by scripts/kafka.sh, and
// asks the brokers (through kadm) who leads a partition and what is in
// sync.
type Cluster struct {
	Brokers []string
	Script  string   // path of scripts/kafka.sh
	Env     []string // extra environment for the script (KWAL_KAFKA_HOME, ...); nil = inherit
	adm     *kadm.Client
	cl      *kgo.Client
}

// NewCluster returns a driver for the cluster at brokers, driven with the
// script at script. Close releases its client.
func NewCluster(brokers []string, script string, opts ...kgo.Opt) (*Cluster, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("chaos: admin client: %w", err)
	}
	return &Cluster{Brokers: brokers, Script: script, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close releases the driver's client; the cluster keeps running.
func (c *Cluster) Close() { c.cl.Close() }

// FindScript returns scripts/kafka.sh of the module that holds dir (the
// first ancestor of dir with a go.mod).
func FindScript(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p := filepath.Join(d, "scripts", "kafka.sh")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("chaos: %w", err)
			}
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("chaos: no go.mod above %s", dir)
		}
	}
}

// Node runs `kafka.sh node ACTION ID` (kill, stop, start, pause, resume);
// start returns once the node is ready.
func (c *Cluster) Node(ctx context.Context, action string, id int32) error {
	cmd := exec.CommandContext(ctx, "bash", c.Script, "node", action, strconv.Itoa(int(id)))
	if c.Env != nil {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chaos: kafka.sh node %s %d: %w: %s", action, id, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Partition is what the cluster says about one partition.
type Partition struct {
	Leader      int32
	LeaderEpoch int32
	ISR         []int32
}

// Partition returns partition 0 of topic as the metadata has it now.
func (c *Cluster) Partition(ctx context.Context, topic string) (Partition, error) {
	md, err := c.adm.Metadata(ctx, topic)
	if err != nil {
		return Partition{}, fmt.Errorf("chaos: metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return Partition{}, fmt.Errorf("chaos: metadata of %s: %v", topic, td.Err)
	}
	p, ok := td.Partitions[0]
	if !ok {
		return Partition{}, fmt.Errorf("chaos: metadata of %s: no partition 0", topic)
	}
	if p.Err != nil {
		return Partition{Leader: -1, ISR: p.ISR}, nil // e.g. LEADER_NOT_AVAILABLE: no leader now
	}
	return Partition{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR}, nil
}

// EndOffset returns the end (high watermark) of partition 0 of topic as
// its leader answers it.
func (c *Cluster) EndOffset(ctx context.Context, topic string) (int64, error) {
	l, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("chaos: end offset of %s: %w", topic, err)
	}
	o, ok := l.Lookup(topic, 0)
	if !ok {
		return 0, fmt.Errorf("chaos: end offset of %s: no answer for partition 0", topic)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("chaos: end offset of %s: %w", topic, o.Err)
	}
	return o.Offset, nil
}

// Nodes returns the IDs of the brokers the metadata lists, sorted.
func (c *Cluster) Nodes(ctx context.Context) ([]int32, error) {
	md, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: broker metadata: %w", err)
	}
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// WaitFor polls the partition every 200 ms until ok says yes, and fails
// when ctx ends first (with the last state seen).
func (c *Cluster) WaitFor(ctx context.Context, topic, what string, ok func(Partition) bool) (Partition, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last Partition
	var lastErr error
	for {
		p, err := c.Partition(ctx, topic)
		if err == nil && ok(p) {
			return p, nil
		}
		last, lastErr = p, err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("chaos: waiting for %s of %s: %w (last seen: leader %d, ISR %v, error %v)",
				what, topic, ctx.Err(), last.Leader, last.ISR, lastErr)
		case <-tick.C:
		}
	}
}

// WaitInSync waits until all n replicas of topic are in sync and a leader
// is elected.
func (c *Cluster) WaitInSync(ctx context.Context, topic string, n int) (Partition, error) {
	return c.WaitFor(ctx, topic, fmt.Sprintf("%d replicas in sync", n), func(p Partition) bool {
		return p.Leader >= 0 && len(p.ISR) == n
	})
}

// ErrNoCluster is returned by ClusterFromEnv when ClusterEnv is not set.
var ErrNoCluster = errors.New("chaos: " + ClusterEnv + " is not set")

// BrokersFromEnv returns the brokers named in ClusterEnv, or ErrNoCluster.
func BrokersFromEnv() ([]string, error) {
	var out []string
	for _, b := range strings.Split(os.Getenv(ClusterEnv), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, ErrNoCluster
	}
	return out, nil
}
