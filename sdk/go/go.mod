module github.com/tenso-project/tenso/sdk/go

go 1.24
