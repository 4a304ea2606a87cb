package embedded

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwal/kwal/internal/kwalerr"
)

// ManifestFile is the name of the shutdown manifest in a data directory:
// each partition's log start and high watermark, written by a clean stop
// and removed by the next start once the broker runs. Present, it says that
// nothing ran since a clean stop, so the partitions must still end where it
// says; absent (a crash, or a first start), the check of the segments alone
// decides.
const ManifestFile = "kwal-shutdown.json"

// manifest is the shutdown manifest's content.
type manifest struct {
	Version    int            `json:"version"`
	Partitions []manifestPart `json:"partitions"`
}

type manifestPart struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	LogStart      int64  `json:"log_start"`
	HighWatermark int64  `json:"high_watermark"`
}

const manifestVersion = 1

// lookup returns the partition's entry; m may be nil.
func (m *manifest) lookup(k partKey) (*manifestPart, bool) {
	if m == nil {
		return nil, false
	}
	for i := range m.Partitions {
		if p := &m.Partitions[i]; p.Topic == k.topic && p.Partition == k.partition {
			return p, true
		}
	}
	return nil, false
}

// readManifest reads dir's manifest: nil when there is none.
func readManifest(dir string) (*manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, kwalerr.Errorf("%s: %w", ManifestFile, err)
	}
	if m.Version != manifestVersion {
		return nil, kwalerr.Errorf("%s: version %d, not %d", ManifestFile, m.Version, manifestVersion)
	}
	return &m, nil
}

// snapshotManifest asks the running broker where each partition on disk
// ends. Records appended after it is taken only make the manifest low,
// which the check tolerates: it never claims a record that was not there.
func snapshotManifest(c *kfake.Cluster, dir string) (*manifest, error) {
	m := &manifest{Version: manifestVersion}
	pdirs, err := os.ReadDir(filepath.Join(dir, "partitions"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, d := range pdirs {
		k, ok := parsePartDir(d.Name())
		if !ok || !d.IsDir() {
			continue
		}
		if pi := c.PartitionInfo(k.topic, k.partition); pi != nil && pi.HighWatermark > pi.LogStartOffset {
			m.Partitions = append(m.Partitions, manifestPart{Topic: k.topic, Partition: k.partition, LogStart: pi.LogStartOffset, HighWatermark: pi.HighWatermark})
		}
	}
	return m, nil
}

// writeManifest writes m as dir's manifest: a temporary file synced, then
// renamed, then the directory synced, so that a crash leaves the old state
// or the new one.
func writeManifest(dir string, m *manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ManifestFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	if err := kwalerr.Join(werr, serr, f.Close()); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeManifest removes dir's manifest, durably.
func removeManifest(dir string) error {
	err := os.Remove(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or removal in dir durable (on Windows a directory
// cannot be opened to sync it: there the rename is all there is).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
