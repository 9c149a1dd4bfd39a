package payroll

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// FileStore keeps the rotated refresh token in a JSON file of mode 0600,
// written atomically (temporary file, fsync, rename). It refuses a file that
// others can read. Refreshes are serialized across processes with an
// advisory lock on a sibling ".lock" file.
type FileStore struct {
	Path string
}

var _ TokenStore = (*FileStore)(nil)
var _ Locker = (*FileStore)(nil)

// DefaultTokenPath is $XDG_STATE_HOME/paysync/token.json, or
// ~/.local/state/paysync/token.json.
func DefaultTokenPath() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "paysync-token.json"
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "paysync", "token.json")
}

// Load reads the stored token.
func (f *FileStore) Load(_ context.Context) (StoredToken, error) {
	fh, err := os.Open(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return StoredToken{}, ErrNoStoredToken
	}
	if err != nil {
		return StoredToken{}, fmt.Errorf("open token file: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return StoredToken{}, fmt.Errorf("stat token file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return StoredToken{}, fmt.Errorf("token file %s is readable by others (mode %04o): run chmod 600 %s", f.Path, fi.Mode().Perm(), f.Path)
	}
	var t StoredToken
	if err := json.NewDecoder(fh).Decode(&t); err != nil {
		return StoredToken{}, fmt.Errorf("token file %s: malformed: %w", f.Path, err)
	}
	if t.RefreshToken == "" {
		return StoredToken{}, ErrNoStoredToken
	}
	return t, nil
}

// Save replaces the stored token atomically.
func (f *FileStore) Save(_ context.Context, t StoredToken) error {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create token dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".token-*.tmp")
	if err != nil {
		return fmt.Errorf("create token file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod token file: %w", err)
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = time.Now().UTC()
	}
	if err := json.NewEncoder(tmp).Encode(t); err != nil {
		tmp.Close()
		return fmt.Errorf("write token file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync token file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close token file: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("replace token file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable
		d.Close()
	}
	return nil
}

// Lock takes an exclusive advisory lock shared by all processes using this
// file. It waits until the lock is free or ctx ends.
func (f *FileStore) Lock(ctx context.Context) (func(), error) {
	return LockFile(ctx, f.Path+".lock")
}

// LockFile takes an exclusive advisory lock (flock) on path, creating it
// with mode 0600; it waits until the lock is free or ctx ends. The returned
// function releases it.
func LockFile(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create lock dir: %w", err)
	}
	lf, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
				lf.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			lf.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			lf.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
