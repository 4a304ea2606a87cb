// Package dirlock makes a directory belong to one process at a time: an OS
// file lock (flock, or LockFileEx on Windows, through gofrs/flock) on a lock
// file inside it, whose content says who holds it. The OS drops the lock
// when the process ends, however it ends, so a crash never leaves a
// directory locked; a second process asking for it fails at once with an
// *InUseError naming the first.
package dirlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// Holder is who holds a directory, as its lock file records it.
type Holder struct {
	PID     int       `json:"pid"`
	Owner   string    `json:"owner"`
	Brokers []string  `json:"brokers,omitempty"`
	Since   time.Time `json:"since"`
}

// ErrInUse is matched (errors.Is) by an *InUseError.
var ErrInUse = errors.New("the directory is in use by another process")

// InUseError is Acquire's error when another process holds the directory.
// Holder is what its lock file says (zero when the other process has not
// written it yet).
type InUseError struct {
	Dir, File string
	Holder    Holder
}

func (e *InUseError) Error() string {
	h := e.Holder
	if h.PID == 0 {
		return fmt.Sprintf("%s is in use by another process (it is starting; its lock file %s names it once it has)", e.Dir, e.File)
	}
	msg := fmt.Sprintf("%s is in use by process %d (%s, since %s)", e.Dir, h.PID, h.Owner, h.Since.Local().Format(time.DateTime))
	if len(h.Brokers) > 0 {
		msg += fmt.Sprintf(", whose embedded broker listens at %s", strings.Join(h.Brokers, ","))
	}
	return msg
}

func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// Lock is a directory held by this process.
type Lock struct {
	fl *flock.Flock
}

// Acquire creates dir if needed and locks its file name (a file inside it),
// recording h there; when another process holds it, it returns an
// *InUseError at once.
func Acquire(dir, name string, h Holder) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	fl := flock.New(filepath.Join(dir, name))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", fl.Path(), err)
	}
	if !ok {
		e := &InUseError{Dir: dir, File: fl.Path()}
		if b, err := os.ReadFile(fl.Path()); err == nil {
			_ = json.Unmarshal(b, &e.Holder) // a half-written file leaves Holder zero
		}
		return nil, e
	}
	l := &Lock{fl: fl}
	l.Record(h)
	return l, nil
}

// Record rewrites who holds the directory (best effort: the lock is what
// counts, the record only names the holder in the next process's error).
func (l *Lock) Record(h Holder) {
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	if h.Owner == "" {
		h.Owner = filepath.Base(os.Args[0])
	}
	if h.Since.IsZero() {
		h.Since = time.Now()
	}
	if b, err := json.Marshal(h); err == nil {
		_ = os.WriteFile(l.fl.Path(), append(b, '\n'), 0o644)
	}
}

// Release gives the directory up. Idempotent.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	return l.fl.Unlock()
}
