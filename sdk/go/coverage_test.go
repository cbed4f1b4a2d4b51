//go:build cgo

package tenso

import (
	"debug/elf"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The share of libtenso's exported functions that this package calls: the functions the
// loaded library exports (its dynamic symbol table) against the tenso_* names the package's
// Go files and C preamble use outside comments. Below 90% the SDK has fallen behind the ABI.
//
// The completion-based calls (1.5: tenso_node_queue_*, tenso_node_*_start, tenso_node_op_*)
// are not counted: they exist so that an event loop (asyncio, tokio) need not park a thread
// per call, which is what a goroutine in a blocking call already costs nothing to do (the Go
// scheduler is that event loop). A Go wrapper would put a second loop beside the runtime's.
var notForGo = regexp.MustCompile(`^tenso_node_(queue_[a-z_]+|op_[a-z_]+|[a-z_]+_start)$`)

func TestABICoverage(t *testing.T) {
	const want = 0.90
	f, err := elf.Open(LibraryPath())
	if err != nil {
		t.Fatalf("open %s: %v", LibraryPath(), err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	var skipped []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && strings.HasPrefix(s.Name, "tenso_") {
			if notForGo.MatchString(s.Name) {
				skipped = append(skipped, s.Name)
				continue
			}
			exported[s.Name] = true
		}
	}
	if len(exported) < 100 {
		t.Fatalf("%s exports only %d tenso_* functions: not libtenso?", LibraryPath(), len(exported))
	}

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "tgo.h")
	ident := regexp.MustCompile(`\btenso_[a-z0-9_]+`)
	lineComment := regexp.MustCompile(`//.*`)
	blockComment := regexp.MustCompile(`(?s)/\*.*?\*/`)
	used := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// C block comments first (a "//" inside one is text), then line comments. A Go
		// file's cgo preamble is itself a block comment, so Go files lose only their
		// line comments.
		text := string(src)
		if strings.HasSuffix(name, ".h") {
			text = blockComment.ReplaceAllString(text, "")
		}
		text = lineComment.ReplaceAllString(text, "")
		for _, id := range ident.FindAllString(text, -1) {
			used[id] = true
		}
	}
	var missing []string
	covered := 0
	for name := range exported {
		if used[name] {
			covered++
		} else {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	share := float64(covered) / float64(len(exported))
	t.Logf("the Go SDK calls %d of libtenso's %d exported functions (%.1f%%); not called: %s; "+
		"not counted (completion-based, for event loops): %d", covered, len(exported), 100*share,
		strings.Join(missing, " "), len(skipped))
	if share < want {
		t.Errorf("ABI coverage %.1f%% is below %.0f%%", 100*share, 100*want)
	}
}
