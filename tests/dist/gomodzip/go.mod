module github.com/tenso-project/tenso/tests/dist/gomodzip

go 1.24

require golang.org/x/mod v0.24.0
