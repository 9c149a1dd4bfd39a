package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// TestReadSettings_Everywhere: the reader settings come from the
// environment (PAYSYNC_DATE_FORMAT, PAYSYNC_DECIMAL_COMMA,
// PAYSYNC_DELIMITER) for import and the inbox (run --once) alike, and the
// same flags override them on import, run and publish (run --once
// --date-format used to answer "flag provided but not defined").
func TestReadSettings_Everywhere(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	us := "id;employee_id;date;hours;code\nus-1;MV8xXzE=;11/02/2026;7,5;T1\n"
	write := func(dir, name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(us), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	units := func() string {
		for _, c := range s.sb.State().Companies {
			for _, p := range c.PayParts {
				return p.Numbers.Units.Decimal.String()
			}
		}
		return ""
	}
	settings := []string{"PAYSYNC_DATE_FORMAT", "MM/DD/YYYY", "PAYSYNC_DECIMAL_COMMA", "true", "PAYSYNC_DELIMITER", ";"}

	t.Run("import", func(t *testing.T) {
		env := with(s.env, append([]string{"PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db")}, settings...)...)
		if r := runInProcess(t, env, "import", "--dry-run", write(t.TempDir(), "us.csv")); r.code != 0 || !strings.Contains(r.stdout, "7.5") {
			t.Errorf("import --dry-run with the settings in the environment: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("inbox", func(t *testing.T) {
		in := t.TempDir()
		write(in, "us.csv")
		env := with(s.env, append([]string{"PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_INBOX", in}, settings...)...)
		if r := runInProcess(t, env, "run", "--once"); r.code != 0 || units() != "7.5" {
			t.Errorf("run --once with the settings in the environment: exit %d, payroll %q\n%s%s", r.code, units(), r.stdout, r.stderr)
		}
	})
	t.Run("flags override", func(t *testing.T) {
		env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_INBOX", t.TempDir(), "PAYSYNC_DATE_FORMAT", "DD/MM/YYYY")
		for _, args := range [][]string{
			{"run", "--once", "--date-format", "MM/DD/YYYY", "--decimal-comma", "--delimiter", ";"},
			{"import", "--dry-run", "--date-format", "MM/DD/YYYY", "--decimal-comma", "--delimiter", ";", write(t.TempDir(), "us.csv")},
		} {
			if r := runInProcess(t, env, args...); r.code != 0 {
				t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
		}
		if r := runInProcess(t, env, "publish", "--date-format", "MM/DD/YYYY", "--help"); strings.Contains(r.stderr, "not defined") {
			t.Errorf("publish has no --date-format:\n%s", r.stderr)
		}
	})
	t.Run("a bad encoding or time zone names the setting", func(t *testing.T) {
		for _, kv := range [][2]string{{"PAYSYNC_ENCODING", "ebcdic"}, {"PAYSYNC_TIME_ZONE", "Mars/Olympus"}} {
			env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), kv[0], kv[1])
			if r := runInProcess(t, env, "import", "--dry-run", write(t.TempDir(), "us.csv")); r.code != 2 || !strings.Contains(r.stderr, kv[0]) {
				t.Errorf("%s=%s: exit %d\n%s", kv[0], kv[1], r.code, r.stderr)
			}
		}
	})
	t.Run("a bad delimiter names the variable", func(t *testing.T) {
		env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_DELIMITER", ";;")
		if r := runInProcess(t, env, "import", "--dry-run", write(t.TempDir(), "us.csv")); r.code != 2 || !strings.Contains(r.stderr, "PAYSYNC_DELIMITER") {
			t.Errorf("PAYSYNC_DELIMITER=;;: exit %d\n%s", r.code, r.stderr)
		}
	})
}
