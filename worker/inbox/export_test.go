package inbox

import "testing"

// SetBeforeRename makes f run just before each file is moved, until the
// test ends.
func SetBeforeRename(t testing.TB, f func(path string)) {
	beforeRename = f
	t.Cleanup(func() { beforeRename = nil })
}
