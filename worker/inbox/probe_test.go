package inbox_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/worker/inbox"
)

func TestProbe(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string) inbox.Config
		level    paysync.CheckLevel
		err      error  // errors.Is
		detail   string // in Detail
		pathBase string // the *fs.PathError's path ends in it
	}{
		{"healthy, nothing yet", func(t *testing.T, dir string) inbox.Config { return inbox.Config{Dir: dir} },
			paysync.CheckOK, nil, "writable; processed/ created on first use, failed/ created on first use; schedule @every 1m", ""},
		{"with processed/ and failed/", func(t *testing.T, dir string) inbox.Config {
			probeMkdir(t, filepath.Join(dir, inbox.ProcessedDir))
			probeMkdir(t, filepath.Join(dir, inbox.FailedDir))
			return inbox.Config{Dir: dir, Schedule: "0 6 * * 1-5"}
		}, paysync.CheckOK, nil, "processed/ writable, failed/ writable; schedule 0 6 * * 1-5", ""},
		{"missing", func(t *testing.T, dir string) inbox.Config { return inbox.Config{Dir: filepath.Join(dir, "nope")} },
			paysync.CheckFail, inbox.ErrNoFolder, "does not exist", "nope"},
		{"a file", func(t *testing.T, dir string) inbox.Config {
			p := filepath.Join(dir, "file")
			probeWrite(t, p)
			return inbox.Config{Dir: p}
		}, paysync.CheckFail, inbox.ErrNotFolder, "is not a directory (it is a file)", "file"},
		{"failed/ is a file", func(t *testing.T, dir string) inbox.Config {
			probeWrite(t, filepath.Join(dir, inbox.FailedDir))
			return inbox.Config{Dir: dir}
		}, paysync.CheckFail, inbox.ErrNotFolder, "failed is not a directory", inbox.FailedDir},
		{"bad schedule", func(t *testing.T, dir string) inbox.Config { return inbox.Config{Dir: dir, Schedule: "every minute"} },
			paysync.CheckFail, inbox.ErrBadSchedule, `schedule "every minute"`, ""},
		{"not writable", func(t *testing.T, dir string) inbox.Config {
			if os.Geteuid() == 0 {
				t.Skip("root writes anywhere")
			}
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
			return inbox.Config{Dir: dir}
		}, paysync.CheckFail, inbox.ErrNotWritable, "is not writable", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tt.setup(t, dir)
			c := inbox.Probe(cfg)
			if c.Level != tt.level || !strings.Contains(c.Detail, tt.detail) || (tt.err != nil && !errors.Is(c.Err, tt.err)) {
				t.Fatalf("got %v %q (err %v), want %v with %q (err %v)", c.Level, c.Detail, c.Err, tt.level, tt.detail, tt.err)
			}
			if strings.Contains(c.Detail, "PAYSYNC_") {
				t.Errorf("detail names a variable: %q", c.Detail)
			}
			if tt.pathBase != "" {
				var pe *fs.PathError
				if !errors.As(c.Err, &pe) || filepath.Base(pe.Path) != tt.pathBase {
					t.Errorf("err %v: want a path error on %s", c.Err, tt.pathBase)
				}
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".paysync-probe-") {
					t.Errorf("left behind %s", e.Name())
				}
			}
		})
	}
}

func probeMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func probeWrite(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}
