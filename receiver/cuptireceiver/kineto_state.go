// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
)

// maxTrackedFiles bounds the Kineto reader's memory of files already read.
const maxTrackedFiles = 10000

// filesKey is the storage key of the Kineto files already read.
const filesKey = "kineto.files"

// storedFile is one read file as kept in the storage extension.
type storedFile struct {
	Size  int64 `json:"size"`
	MTime int64 `json:"mtime_ns"`
}

// openKinetoStorage opens the client of kineto.storage and loads the files
// read before a restart, so they are not counted twice.
func (r *cuptiReceiver) openKinetoStorage(ctx context.Context, host component.Host) error {
	id := r.cfg.Kineto.Storage
	if id == nil {
		return nil
	}
	ext, ok := host.GetExtensions()[*id]
	if !ok {
		return fmt.Errorf("kineto.storage: extension %q not found; add it under extensions and service.extensions", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return fmt.Errorf("kineto.storage: extension %q is not a storage extension", id)
	}
	client, err := se.GetClient(ctx, component.KindReceiver, r.set.ID, "kineto")
	if err != nil {
		return fmt.Errorf("kineto.storage: %w", err)
	}
	r.store = client
	b, err := client.Get(ctx, filesKey)
	if err != nil {
		return fmt.Errorf("kineto.storage: read %s: %w", filesKey, err)
	}
	if len(b) == 0 {
		return nil
	}
	var files map[string]storedFile
	if err := json.Unmarshal(b, &files); err != nil {
		// A damaged entry must not stop the receiver: files are read again.
		r.set.Logger.Warn("kineto.storage: stored read positions are not valid; files will be read again", zap.Error(err))
		return nil
	}
	for p, f := range files {
		if len(r.files) >= maxTrackedFiles {
			break
		}
		r.files[p] = fileState{size: f.Size, mtime: time.Unix(0, f.MTime), done: true}
	}
	return nil
}

// saveKinetoFiles writes the files read so far; a failure is logged and the
// receiver goes on (a restart may then read some files again).
func (r *cuptiReceiver) saveKinetoFiles(ctx context.Context) {
	if r.store == nil {
		return
	}
	files := make(map[string]storedFile, len(r.files))
	for p, f := range r.files {
		if f.done {
			files[p] = storedFile{Size: f.size, MTime: f.mtime.UnixNano()}
		}
	}
	b, err := json.Marshal(files)
	if err == nil {
		err = r.store.Set(ctx, filesKey, b)
	}
	if err != nil {
		r.badLog.Warn("kineto.storage: cannot save read positions", zap.Error(err))
	}
}
