// Command godoc checks that every exported identifier of a Go module has a doc comment and
// writes the module's reference as one HTML page, the way pkg.go.dev would show it: the
// package overview, an index, constants, variables, functions, types with their methods, and
// the runnable examples from the _test.go files.
//
// Usage:
//
//	go run . [-o page.html] [-title TITLE] MODULE_DIR...
//
// It asks `go list -json ./...` in each MODULE_DIR for the packages and their files (so the
// build constraints of this machine apply: the cgo files, not the !cgo stub), parses them
// with go/parser and renders them with go/doc. The exit status is 1 when an identifier lacks
// its doc comment (each one is listed as file:line), 2 on a usage or I/O error.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// listed is the part of `go list -json` this tool reads.
type listed struct {
	Dir          string
	ImportPath   string
	Name         string
	GoFiles      []string
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// pkgDoc is one package, parsed and documented.
type pkgDoc struct {
	fset *token.FileSet
	pkg  *doc.Package
	dir  string
}

func main() {
	out := flag.String("o", "", "write the HTML page here (default: only check)")
	title := flag.String("title", "Go API reference", "the page title")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: godoc [-o page.html] [-title TITLE] MODULE_DIR...")
		os.Exit(2)
	}
	var pkgs []pkgDoc
	for _, dir := range flag.Args() {
		ps, err := load(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "godoc: %s: %v\n", dir, err)
			os.Exit(2)
		}
		pkgs = append(pkgs, ps...)
	}
	missing := 0
	for _, p := range pkgs {
		for _, m := range undocumented(p) {
			fmt.Fprintln(os.Stderr, m)
			missing++
		}
	}
	if *out != "" {
		var b bytes.Buffer
		page(&b, *title, pkgs)
		if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "godoc: %v\n", err)
			os.Exit(2)
		}
	}
	if missing > 0 {
		fmt.Fprintf(os.Stderr, "godoc: %d exported identifiers without a doc comment\n", missing)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "godoc: %d packages, every exported identifier documented\n", len(pkgs))
}

// load lists the packages of the module in dir and parses each with its test files (for the
// examples).
func load(dir string) ([]pkgDoc, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkgDoc
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var l listed
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		var files []*ast.File
		names := append(append(append(append([]string{}, l.GoFiles...), l.CgoFiles...), l.TestGoFiles...), l.XTestGoFiles...)
		for _, name := range names {
			f, err := parser.ParseFile(fset, filepath.Join(l.Dir, name), nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		p, err := doc.NewFromFiles(fset, files, l.ImportPath)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, pkgDoc{fset: fset, pkg: p, dir: l.Dir})
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].pkg.ImportPath < pkgs[j].pkg.ImportPath })
	return pkgs, nil
}

// undocumented lists "file:line: what" for the package doc and every exported identifier
// that has no doc comment. A grouped const or var declaration is documented by the group's
// comment; a command (package main) needs only its package doc.
func undocumented(p pkgDoc) []string {
	var out []string
	at := func(pos token.Pos, what string) {
		out = append(out, fmt.Sprintf("%s: %s has no doc comment", p.fset.Position(pos), what))
	}
	if strings.TrimSpace(p.pkg.Doc) == "" {
		out = append(out, fmt.Sprintf("%s: package %s has no package doc comment", p.dir, p.pkg.Name))
	}
	if p.pkg.Name == "main" {
		return out
	}
	values := func(vs []*doc.Value, kind string) {
		for _, v := range vs {
			if v.Doc != "" {
				continue
			}
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, n := range vs.Names {
					if n.IsExported() && vs.Doc == nil && vs.Comment == nil {
						at(n.Pos(), kind+" "+n.Name)
					}
				}
			}
		}
	}
	funcs := func(fs []*doc.Func, owner string) {
		for _, f := range fs {
			if ast.IsExported(f.Name) && f.Doc == "" {
				at(f.Decl.Pos(), "func "+owner+f.Name)
			}
		}
	}
	values(p.pkg.Consts, "const")
	values(p.pkg.Vars, "var")
	funcs(p.pkg.Funcs, "")
	for _, t := range p.pkg.Types {
		if t.Doc == "" {
			at(t.Decl.Pos(), "type "+t.Name)
		}
		values(t.Consts, "const")
		values(t.Vars, "var")
		funcs(t.Funcs, "")
		funcs(t.Methods, "("+t.Name+") ")
	}
	return out
}

const style = `body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
pre{background:#f6f8fa;padding:.6rem .8rem;overflow-x:auto;font-size:13px;line-height:1.4}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace}h2{border-bottom:1px solid #ddd;margin-top:2.5rem}
h3{margin-top:1.8rem}h4{margin-top:1.2rem}.index li{list-style:none}.index{padding-left:1rem}
details{margin:.5rem 0}summary{cursor:pointer;color:#555}a{color:#0b62a4;text-decoration:none}`

// page writes the HTML reference of pkgs.
func page(w *bytes.Buffer, title string, pkgs []pkgDoc) {
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head><body>\n",
		html.EscapeString(title), style)
	fmt.Fprintf(w, "<h1>%s</h1>\n<ul>\n", html.EscapeString(title))
	for _, p := range pkgs {
		fmt.Fprintf(w, "<li><a href=\"#pkg-%s\"><code>%s</code></a></li>\n", anchor(p.pkg.ImportPath), html.EscapeString(p.pkg.ImportPath))
	}
	fmt.Fprintln(w, "</ul>")
	for _, p := range pkgs {
		pkgSection(w, p)
	}
	fmt.Fprintln(w, "</body></html>")
}

func pkgSection(w *bytes.Buffer, p pkgDoc) {
	d := p.pkg
	id := anchor(d.ImportPath)
	fmt.Fprintf(w, "<h2 id=\"pkg-%s\">package %s</h2>\n<p><code>import \"%s\"</code></p>\n", id, d.Name, html.EscapeString(d.ImportPath))
	w.Write(d.HTML(d.Doc))
	examples(w, p, d.Examples)
	if d.Name == "main" {
		return
	}
	// Index.
	fmt.Fprintln(w, "<h3>Index</h3>\n<ul class=\"index\">")
	for _, f := range d.Funcs {
		fmt.Fprintf(w, "<li><a href=\"#%s-%s\"><code>func %s</code></a></li>\n", id, f.Name, f.Name)
	}
	for _, t := range d.Types {
		fmt.Fprintf(w, "<li><a href=\"#%s-%s\"><code>type %s</code></a><ul>\n", id, t.Name, t.Name)
		for _, f := range append(append([]*doc.Func{}, t.Funcs...), t.Methods...) {
			name := f.Name
			if f.Recv != "" {
				name = "(" + f.Recv + ") " + f.Name
			}
			fmt.Fprintf(w, "<li><a href=\"#%s-%s.%s\"><code>func %s</code></a></li>\n", id, t.Name, f.Name, html.EscapeString(name))
		}
		fmt.Fprintln(w, "</ul></li>")
	}
	fmt.Fprintln(w, "</ul>")
	if len(d.Consts) > 0 {
		fmt.Fprintln(w, "<h3>Constants</h3>")
		valueDocs(w, p, d.Consts)
	}
	if len(d.Vars) > 0 {
		fmt.Fprintln(w, "<h3>Variables</h3>")
		valueDocs(w, p, d.Vars)
	}
	if len(d.Funcs) > 0 {
		fmt.Fprintln(w, "<h3>Functions</h3>")
		for _, f := range d.Funcs {
			funcDoc(w, p, f, id+"-"+f.Name)
		}
	}
	if len(d.Types) > 0 {
		fmt.Fprintln(w, "<h3>Types</h3>")
	}
	for _, t := range d.Types {
		fmt.Fprintf(w, "<h4 id=\"%s-%s\">type %s</h4>\n", id, t.Name, t.Name)
		decl(w, p, t.Decl)
		w.Write(d.HTML(t.Doc))
		examples(w, p, t.Examples)
		valueDocs(w, p, t.Consts)
		valueDocs(w, p, t.Vars)
		for _, f := range append(append([]*doc.Func{}, t.Funcs...), t.Methods...) {
			funcDoc(w, p, f, id+"-"+t.Name+"."+f.Name)
		}
	}
}

func valueDocs(w *bytes.Buffer, p pkgDoc, vs []*doc.Value) {
	for _, v := range vs {
		decl(w, p, v.Decl)
		w.Write(p.pkg.HTML(v.Doc))
	}
}

func funcDoc(w *bytes.Buffer, p pkgDoc, f *doc.Func, id string) {
	title := f.Name
	if f.Recv != "" {
		title = "(" + f.Recv + ") " + f.Name
	}
	fmt.Fprintf(w, "<h4 id=\"%s\">func %s</h4>\n", id, html.EscapeString(title))
	decl(w, p, f.Decl)
	w.Write(p.pkg.HTML(f.Doc))
	examples(w, p, f.Examples)
}

func examples(w *bytes.Buffer, p pkgDoc, exs []*doc.Example) {
	for _, ex := range exs {
		name := "Example"
		if ex.Suffix != "" {
			name += " (" + ex.Suffix + ")"
		}
		fmt.Fprintf(w, "<details><summary>%s</summary>\n", html.EscapeString(name))
		if ex.Doc != "" {
			w.Write(p.pkg.HTML(ex.Doc))
		}
		var code bytes.Buffer
		var node any = ex.Code
		if ex.Play != nil {
			node = ex.Play
		}
		if err := (&printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 4}).Fprint(&code, p.fset, node); err == nil {
			fmt.Fprintf(w, "<pre>%s</pre>\n", html.EscapeString(unbrace(code.String(), ex.Play == nil)))
		}
		if ex.Output != "" {
			fmt.Fprintf(w, "<p>Output:</p><pre>%s</pre>\n", html.EscapeString(ex.Output))
		}
		fmt.Fprintln(w, "</details>")
	}
}

// unbrace strips the braces of an example's block body and one level of indentation.
func unbrace(s string, block bool) string {
	if !block {
		return s
	}
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimPrefix(l, "\t"), "    ")
	}
	return strings.Join(lines, "\n")
}

func decl(w *bytes.Buffer, p pkgDoc, n ast.Decl) {
	var b bytes.Buffer
	if err := (&printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 4}).Fprint(&b, p.fset, n); err != nil {
		return
	}
	fmt.Fprintf(w, "<pre>%s</pre>\n", html.EscapeString(b.String()))
}

func anchor(importPath string) string {
	return strings.NewReplacer("/", "-", ".", "-").Replace(importPath)
}
