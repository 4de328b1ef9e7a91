package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// migrate and demo create the --db file, never its directory: a path whose
// directory does not exist (a typo), or whose "directory" is a file, cannot
// succeed however often it is tried, as a --db file that does not exist
// cannot for the other commands: exit 2, saying which directory. They
// exited 1, "could not be done now" (for the demo: "found a discrepancy").
func TestAFileInADirectoryThatDoesNotExistIsRefusedWithExitTwo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "no-such-dir", "app.db"), filepath.Join(file, "app.db")} {
		for _, cmd := range []string{"migrate", "demo"} {
			t.Run(cmd+"/"+filepath.Base(filepath.Dir(path)), func(t *testing.T) {
				is := is.New(t)
				code, _, stderr := cli(t, cmd, "--db", path)
				t.Log(stderr)
				is.Equal(code, exitUsage)                             // cannot succeed as given
				is.True(strings.Contains(stderr, filepath.Dir(path))) // names the directory
				_, err := os.Stat(filepath.Join(dir, "no-such-dir"))
				is.True(os.IsNotExist(err)) // nothing was created
			})
		}
	}
}
