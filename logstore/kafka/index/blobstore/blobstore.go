// Package blobstore adapts a gocloud.dev/blob bucket (S3, GCS, Azure, a
// directory, memory) to index.Store, so that a node's region index can live
// in object storage and another node can read it during a region move.
//
// Writes rely on the bucket's atomic object replacement (object stores;
// fileblob writes a temporary file and renames it).
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/kwal/kwal/logstore/kafka/index"
)

// Store is an index.Store over a bucket, with every name under a prefix.
type Store struct {
	bucket *blob.Bucket
	prefix string
}

var _ index.Store = (*Store)(nil)

// New returns a Store keeping blob name under the key prefix+name of
// bucket. The caller keeps ownership of the bucket (and closes it). Give
// each node its own prefix, ending with '/' for a directory-like layout,
// for example "kwal/index/<node>/".
func New(bucket *blob.Bucket, prefix string) index.Store {
	return &Store{bucket: bucket, prefix: prefix}
}

// Get implements index.Store.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	data, err := s.bucket.ReadAll(ctx, s.prefix+name)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("%w: %s: %w", index.ErrNotExist, name, err)
		}
		return nil, fmt.Errorf("blobstore: reading %s: %w", name, err)
	}
	return data, nil
}

// Put implements index.Store.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	if err := s.bucket.WriteAll(ctx, s.prefix+name, data, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("blobstore: writing %s: %w", name, err)
	}
	return nil
}

// List implements index.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: s.prefix + prefix})
	var names []string
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("blobstore: listing %q: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		name, ok := strings.CutPrefix(obj.Key, s.prefix)
		if !ok || strings.Contains(name, "/") {
			continue // a deeper "directory": not one of ours
		}
		names = append(names, name)
	}
}

// Delete implements index.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	err := s.bucket.Delete(ctx, s.prefix+name)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("blobstore: deleting %s: %w", name, err)
	}
	return nil
}
