// Command gomodzip writes one module version the way a Go module proxy serves it (the GOPROXY
// protocol, https://go.dev/ref/mod#goproxy-protocol), into a directory that `GOPROXY=file://DIR`
// then serves to `go get`:
//
//	DIR/<escaped module path>/@v/list          the versions, one a line
//	DIR/<escaped module path>/@v/<v>.info      {"Version": v, "Time": ...}
//	DIR/<escaped module path>/@v/<v>.mod       the module's go.mod
//	DIR/<escaped module path>/@v/<v>.zip       the module zip, made by golang.org/x/mod/zip
//
// golang.org/x/mod/zip applies the toolchain's own rules (nested modules, vendor directories
// and files that cannot be in a module are left out; size limits), so the zip is the one the
// public proxy would make from a tag. It also prints the go.sum line of the zip.
//
// Usage: gomodzip -module PATH -version vX.Y.Z -dir MODULE_DIR -out PROXY_DIR -time UNIX_SECONDS
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("gomodzip: ")
	path := flag.String("module", "", "module path")
	version := flag.String("version", "", "semantic version, e.g. v1.4.0")
	dir := flag.String("dir", "", "directory holding the module's go.mod")
	out := flag.String("out", "", "proxy directory to write into")
	stamp := flag.Int64("time", 0, "the version's time, in Unix seconds (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if *path == "" || *version == "" || *dir == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	mv := module.Version{Path: *path, Version: *version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		log.Fatal(err)
	}
	escaped, err := module.EscapePath(mv.Path)
	if err != nil {
		log.Fatal(err)
	}
	vdir := filepath.Join(*out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		log.Fatal(err)
	}

	gomod, err := os.ReadFile(filepath.Join(*dir, "go.mod"))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, mv.Version+".mod"), gomod, 0o644); err != nil {
		log.Fatal(err)
	}

	zipPath := filepath.Join(vdir, mv.Version+".zip")
	f, err := os.Create(zipPath)
	if err != nil {
		log.Fatal(err)
	}
	if err := modzip.CreateFromDir(f, mv, *dir); err != nil {
		f.Close()
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}

	info, err := json.Marshal(struct {
		Version string
		Time    string
	}{mv.Version, time.Unix(*stamp, 0).UTC().Format(time.RFC3339)})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, mv.Version+".info"), append(info, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}

	// list: every version in the directory, in semver order (only one here, but the file
	// must name them all).
	entries, err := os.ReadDir(vdir)
	if err != nil {
		log.Fatal(err)
	}
	var versions []string
	for _, e := range entries {
		if v, ok := strings.CutSuffix(e.Name(), ".info"); ok {
			versions = append(versions, v)
		}
	}
	sort.Strings(versions)
	if err := os.WriteFile(filepath.Join(vdir, "list"), []byte(strings.Join(versions, "\n")+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	sum, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s %s\n", mv.Path, mv.Version, sum)
}
